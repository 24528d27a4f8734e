/* linkmatrix's rounds: every ordered pair exactly once, no rank in two tests in a round,
 * both ends of a test agreeing on who sends, for every rank count from 2 to 64. */
#include "schedule.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

static void check_schedule(int n)
{
        int rounds = schedule_rounds(n);
        assert_int_equal(rounds, n % 2 ? 2 * n : 2 * (n - 1));
        int *tested = calloc((size_t)n * (size_t)n, sizeof(int));
        assert_non_null(tested);
        for (int round = 0; round < rounds; round++) {
                int idle = 0;
                for (int rank = 0; rank < n; rank++) {
                        bool sends, peer_sends;
                        int peer = schedule_peer(rank, n, round, &sends);
                        if (peer < 0) {
                                idle++;
                                continue;
                        }
                        assert_true(peer < n && peer != rank);
                        /* the peer sees this rank, and takes the other part */
                        assert_int_equal(schedule_peer(peer, n, round, &peer_sends), rank);
                        assert_true(sends != peer_sends);
                        if (sends)
                                tested[rank * n + peer]++;
                }
                assert_int_equal(idle, n % 2); /* only the odd count's bye sits out */
        }
        for (int from = 0; from < n; from++)
                for (int to = 0; to < n; to++)
                        assert_int_equal(tested[from * n + to], from != to);
        free(tested);
}

static void test_schedule_tests_every_ordered_pair_once(void **state)
{
        (void)state;
        for (int n = 2; n <= 64; n++)
                check_schedule(n);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_schedule_tests_every_ordered_pair_once),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
