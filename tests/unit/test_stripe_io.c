/* libdsstripe against real directories: random sizes, units and widths read back
 * bit-exact, random writes and truncation against an in-memory model, and every damaged
 * member an error that names it. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <dragstrip/error.h>
#include <dragstrip/pool.h>
#include <dragstrip/stripe.h>

#define MAX_DIRS 16

struct fixture {
        char root[64];
        char paths[MAX_DIRS][96];
        const char *dirs[MAX_DIRS];
};

static int setup(void **state)
{
        struct fixture *f = calloc(1, sizeof(*f));

        strcpy(f->root, "/tmp/test_stripe_io.XXXXXX");
        assert_non_null(mkdtemp(f->root));
        for (int i = 0; i < MAX_DIRS; i++) {
                snprintf(f->paths[i], sizeof(f->paths[i]), "%s/d%d", f->root, i);
                assert_int_equal(mkdir(f->paths[i], 0755), 0);
                f->dirs[i] = f->paths[i];
        }
        *state = f;
        return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st, (void)flag, (void)ftw;
        return remove(path);
}

static int teardown(void **state)
{
        struct fixture *f = *state;

        nftw(f->root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        free(f);
        return 0;
}

static uint8_t *random_bytes(size_t len)
{
        uint8_t *data = malloc(len ? len : 1);

        for (size_t i = 0; i < len; i++)
                data[i] = (uint8_t)rand();
        return data;
}

static void put_file(struct fixture *f, unsigned width, uint64_t unit, const char *name,
                     const uint8_t *data, size_t size)
{
        struct ds_stripe_options options = {.unit = unit};
        struct ds_stripe *s;
        struct ds_error err;
        size_t at = 0;

        if (ds_stripe_create(&s, f->dirs, width, name, &options, &err) != 0)
                fail_msg("create: %s", err.text);
        /* Sequential writes of random lengths, some starting unaligned. */
        while (at < size) {
                size_t len = 1 + (size_t)rand() % (3 * unit);
                if (len > size - at)
                        len = size - at;
                if (ds_stripe_pwrite(s, data + at, len, at, &err) != 0)
                        fail_msg("pwrite: %s", err.text);
                at += len;
        }
        if (ds_stripe_commit(s, &err) != 0 || ds_stripe_close(s, &err) != 0)
                fail_msg("commit: %s", err.text);
}

static void expect_contents(struct fixture *f, unsigned width, const char *name,
                            const uint8_t *data, size_t size)
{
        struct ds_stripe *s;
        struct ds_stripe_info info;
        struct ds_error err;
        uint8_t *back = malloc(size + 8192);
        size_t done = 0;

        if (ds_stripe_open(&s, f->dirs, width, name, NULL, &err) != 0)
                fail_msg("open: %s", err.text);
        ds_stripe_stat(s, &info);
        assert_int_equal(info.size, size);
        assert_true(info.data_crc);
        /* Ask for more than there is: the read stops at the end of the file. */
        assert_int_equal(ds_stripe_pread(s, back, size + 8192, 0, &done, &err), 0);
        assert_int_equal(done, size);
        assert_memory_equal(back, data, size);
        assert_int_equal(ds_stripe_check_data(s, &err), 0);
        for (int r = 0; r < 10 && size > 0; r++) {
                size_t off = (size_t)rand() % size, len = (size_t)rand() % (size - off) + 1;
                assert_int_equal(ds_stripe_pread(s, back + 1, len, off, &done, &err), 0);
                assert_int_equal(done, len);
                assert_memory_equal(back + 1, data + off, len);
        }
        assert_int_equal(ds_stripe_close(s, &err), 0);
        free(back);
}

static void test_stripe_random_sizes_units_widths_read_back_exact(void **state)
{
        struct fixture *f = *state;

        srand(7);
        for (int round = 0; round < 24; round++) {
                unsigned width = 1 + (unsigned)rand() % 6;
                uint64_t unit = 4096u * (1 + (uint64_t)(rand() % 8));
                size_t size = (size_t)rand() % (width * unit * 3 + 1);
                char name[32];
                uint8_t *data;

                if (round == 0)
                        size = 0; /* an empty file */
                if (round == 1)
                        width = 16, size = 16 * unit + 1;
                data = random_bytes(size);
                snprintf(name, sizeof(name), "f%d", round);
                put_file(f, width, unit, name, data, size);
                expect_contents(f, width, name, data, size);
                free(data);
        }
}

static void test_stripe_random_writes_and_truncate_match_model(void **state)
{
        struct fixture *f = *state;
        struct ds_stripe_options options = {.unit = 8192, .flags = DS_STRIPE_WRITE};
        size_t model_size = 0, cap = 200000;
        uint8_t *model = calloc(1, cap), *back = malloc(cap);
        struct ds_stripe *s;
        struct ds_error err;
        size_t done;

        put_file(f, 3, 8192, "rw", NULL, 0);
        if (ds_stripe_open(&s, f->dirs, 3, "rw", &options, &err) != 0)
                fail_msg("open: %s", err.text);
        srand(11);
        for (int i = 0; i < 60; i++) {
                if (i % 10 == 9) {
                        size_t size = (size_t)rand() % cap;
                        if (size > model_size)
                                memset(model + model_size, 0, size - model_size);
                        model_size = size;
                        assert_int_equal(ds_stripe_truncate(s, size, &err), 0);
                        continue;
                }
                size_t off = (size_t)rand() % (cap / 2), len = 1 + (size_t)rand() % (cap / 2);
                uint8_t *chunk = random_bytes(len);
                if (off > model_size)
                        memset(model + model_size, 0, off - model_size);
                memcpy(model + off, chunk, len);
                if (off + len > model_size)
                        model_size = off + len;
                assert_int_equal(ds_stripe_pwrite(s, chunk, len, off, &err), 0);
                free(chunk);
                /* Holes left by writes past the end read as zeros. */
                assert_int_equal(ds_stripe_pread(s, back, cap, 0, &done, &err), 0);
                assert_int_equal(done, model_size);
                assert_memory_equal(back, model, model_size);
        }
        assert_int_equal(ds_stripe_close(s, &err), 0);
        /* Reopened, every member's length agrees with the layout again. */
        assert_int_equal(ds_stripe_verify(f->dirs, 3, "rw", false, NULL, &err), 0);
        if (ds_stripe_open(&s, f->dirs, 3, "rw", NULL, &err) != 0)
                fail_msg("reopen: %s", err.text);
        assert_int_equal(ds_stripe_pread(s, back, cap, 0, &done, &err), 0);
        assert_int_equal(done, model_size);
        assert_memory_equal(back, model, model_size);
        assert_int_equal(ds_stripe_close(s, &err), 0);
        free(model);
        free(back);
}

static void member_path(struct fixture *f, unsigned i, const char *name, char *out)
{
        sprintf(out, "%s/%s", f->dirs[i], name);
}

static void expect_open_fails(struct fixture *f, unsigned width, const char *name, const char *part)
{
        struct ds_stripe *s;
        struct ds_error err = {{0}};
        int rc = ds_stripe_open(&s, f->dirs, width, name, NULL, &err);

        if (rc == 0)
                fail_msg("open of a damaged file succeeded (expected '%s')", part);
        if (!strstr(err.text, part))
                fail_msg("expected '%s' in '%s'", part, err.text);
}

/* Each fault on a fresh copy of file "a", with "b" a second file of the same shape. */
static void fresh_pair(struct fixture *f, const uint8_t *data)
{
        ds_stripe_unlink(f->dirs, 3, "a", NULL);
        ds_stripe_unlink(f->dirs, 3, "b", NULL);
        put_file(f, 3, 4096, "a", data, 100000);
        put_file(f, 3, 4096, "b", data, 100000);
}

static void test_stripe_damaged_members_are_named(void **state)
{
        struct fixture *f = *state;
        uint8_t *data = random_bytes(100000);
        char path[256], other[256];
        int fd;

        fresh_pair(f, data);
        member_path(f, 1, "a", path);
        assert_int_equal(truncate(path, 4096 + 1000), 0);
        expect_open_fails(f, 3, "a", "member 1 (");
        expect_open_fails(f, 3, "a", "truncated");

        fresh_pair(f, data);
        member_path(f, 1, "b", other);
        assert_int_equal(rename(other, path), 0); /* b's member 1 where a's was */
        expect_open_fails(f, 3, "a", "member 1 (");
        expect_open_fails(f, 3, "a", "another striped file");

        fresh_pair(f, data);
        member_path(f, 2, "a", path);
        fd = open(path, O_WRONLY);
        assert_int_equal(pwrite(fd, "X", 1, 30), 1);
        close(fd);
        expect_open_fails(f, 3, "a", "member 2 (");
        expect_open_fails(f, 3, "a", "bad header");

        fresh_pair(f, data);
        member_path(f, 2, "a", path);
        fd = open(path, O_WRONLY | O_APPEND);
        assert_int_equal(write(fd, "more", 4), 4);
        close(fd);
        expect_open_fails(f, 3, "a", "too long");

        fresh_pair(f, data);
        member_path(f, 0, "a", path);
        assert_int_equal(unlink(path), 0);
        expect_open_fails(f, 3, "a", "member 0 of 3");

        expect_open_fails(f, 2, "b", "over 3 directories, 2 given");
        expect_open_fails(f, 3, "nothing", "no striped file");
        free(data);
}

static void test_stripe_directories_out_of_order_are_named(void **state)
{
        struct fixture *f = *state;
        const char *swapped[2] = {f->dirs[1], f->dirs[0]};
        struct ds_stripe *s;
        struct ds_error err;

        put_file(f, 2, 4096, "o", (const uint8_t *)"hello", 5);
        assert_int_not_equal(ds_stripe_open(&s, swapped, 2, "o", NULL, &err), 0);
        assert_non_null(strstr(err.text, "another order"));
}

static void test_stripe_corrupt_data_fails_the_checksum(void **state)
{
        struct fixture *f = *state;
        uint8_t *data = random_bytes(50000);
        struct ds_error err;
        char path[256];
        int fd;

        put_file(f, 2, 4096, "c", data, 50000);
        assert_int_equal(ds_stripe_verify(f->dirs, 2, "c", true, NULL, &err), 0);
        member_path(f, 1, "c", path);
        fd = open(path, O_WRONLY);
        assert_int_equal(pwrite(fd, "\xff\x00", 2, 4096 + 777), 2);
        close(fd);
        assert_int_equal(ds_stripe_verify(f->dirs, 2, "c", false, NULL, &err), 0);
        assert_int_equal(ds_stripe_verify(f->dirs, 2, "c", true, NULL, &err), -EIO);
        assert_non_null(strstr(err.text, "member 1"));
        assert_non_null(strstr(err.text, "checksum mismatch"));
        free(data);
}

static void test_stripe_uncommitted_file_leaves_nothing(void **state)
{
        struct fixture *f = *state;
        struct ds_stripe *s;
        struct ds_error err;
        char path[256];

        assert_int_equal(ds_stripe_create(&s, f->dirs, 4, "u", NULL, &err), 0);
        assert_int_equal(ds_stripe_pwrite(s, "partial", 7, 0, &err), 0);
        assert_int_equal(ds_stripe_close(s, &err), 0);
        for (unsigned i = 0; i < 4; i++) {
                member_path(f, i, "u", path);
                assert_int_equal(access(path, F_OK), -1);
                /* and no temporary either: the directory holds nothing */
                struct stat st;
                assert_int_equal(stat(f->dirs[i], &st), 0);
                assert_int_equal(st.st_nlink, 2);
        }
        /* A name that exists is not replaced without REPLACE. */
        put_file(f, 1, 4096, "e", (const uint8_t *)"x", 1);
        assert_int_equal(ds_stripe_create(&s, f->dirs, 1, "e", NULL, &err), -EEXIST);
}

static void test_stripe_rejects_bad_arguments(void **state)
{
        struct fixture *f = *state;
        struct ds_stripe_options bad_unit = {.unit = 5000};
        const char *same[2] = {f->dirs[0], f->dirs[0]};
        struct ds_stripe *s;
        struct ds_error err;
        char **dirs;
        unsigned n;

        assert_int_equal(ds_stripe_create(&s, f->dirs, 2, "x", &bad_unit, &err), -EINVAL);
        assert_int_equal(ds_stripe_create(&s, same, 2, "x", NULL, &err), -EINVAL);
        assert_non_null(strstr(err.text, "same directory"));
        assert_int_equal(ds_stripe_create(&s, f->dirs, 1, "a/b", NULL, &err), -EINVAL);
        assert_int_equal(ds_stripe_create(&s, f->dirs, 1, ".dstmp.x", NULL, &err), -EINVAL);
        assert_int_equal(ds_stripe_create(&s, f->dirs, 0, "x", NULL, &err), -EINVAL);
        assert_int_equal(ds_stripe_dirs_parse("a,,b", &dirs, &n, &err), -EINVAL);
        assert_int_equal(ds_stripe_dirs_parse("a,b", &dirs, &n, &err), 0);
        assert_int_equal(n, 2);
        assert_string_equal(dirs[1], "b");
        assert_null(dirs[2]);
        free(dirs);
}

static void test_stripe_unaligned_buffers_and_offsets(void **state)
{
        struct fixture *f = *state;
        uint8_t *data = random_bytes(300001), *back = malloc(300001 + 1);
        struct ds_stripe *s;
        struct ds_error err;
        size_t done;

        put_file(f, 3, 65536, "al", data, 300001);
        assert_int_equal(ds_stripe_open(&s, f->dirs, 3, "al", NULL, &err), 0);
        assert_int_equal(ds_stripe_pread(s, back + 1, 300000, 1, &done, &err), 0);
        assert_int_equal(done, 300000);
        assert_memory_equal(back + 1, data + 1, 300000);
        assert_int_equal(ds_stripe_pwrite(s, data, 10, 0, &err), -EBADF); /* read-only */
        assert_int_equal(ds_stripe_close(s, &err), 0);
        free(data);
        free(back);
}

struct scan_seen {
        char names[8][32];
        enum ds_stripe_state states[8];
        unsigned count;
};

static int note_entry(const struct ds_stripe_entry *entry, void *ctx)
{
        struct scan_seen *seen = ctx;

        assert_true(seen->count < 8);
        snprintf(seen->names[seen->count], sizeof(seen->names[0]), "%s", entry->name);
        seen->states[seen->count++] = entry->state;
        assert_true((entry->state == DS_STRIPE_OK) == (entry->info != NULL));
        assert_true((entry->state == DS_STRIPE_OK) == (entry->problem == NULL));
        return 0;
}

static void test_stripe_scan_reports_ok_damaged_partial_and_hidden(void **state)
{
        struct fixture *f = *state;
        uint8_t *data = random_bytes(200000);
        struct scan_seen seen = {0}, all = {0};
        struct ds_stripe *running;
        struct ds_error err;
        char path[160];

        put_file(f, 3, 4096, "good", data, 200000);
        put_file(f, 3, 4096, "nozero", data, 200000);
        put_file(f, 3, 4096, ".dot", data, 1000);
        member_path(f, 0, "nozero", path);
        assert_int_equal(unlink(path), 0);
        member_path(f, 2, "fifo", path);
        assert_int_equal(mkfifo(path, 0600), 0); /* must neither block nor be listed */
        assert_int_equal(ds_stripe_create(&running, f->dirs, 3, "running", NULL, &err), 0);

        assert_int_equal(ds_stripe_scan(f->dirs, 3, 0, note_entry, &seen, &err), 0);
        assert_int_equal(seen.count, 3);
        assert_string_equal(seen.names[0], "good");
        assert_int_equal(seen.states[0], DS_STRIPE_OK);
        assert_string_equal(seen.names[1], "nozero");
        assert_int_equal(seen.states[1], DS_STRIPE_DAMAGED);
        assert_string_equal(seen.names[2], "running");
        assert_int_equal(seen.states[2], DS_STRIPE_PARTIAL);
        assert_int_equal(ds_stripe_scan(f->dirs, 3, DS_STRIPE_SCAN_HIDDEN, note_entry, &all, &err),
                         0);
        assert_int_equal(all.count, 4);
        assert_string_equal(all.names[0], ".dot");

        /* fsck leaves the running put alone; once it is gone (never committed), nothing. */
        assert_int_equal(ds_stripe_fsck(f->dirs, 3, NULL, NULL, &err), 0);
        assert_int_equal(ds_stripe_close(running, &err), 0);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(ds_stripe_scan(f->dirs, 3, 0, note_entry, &seen, &err), 0);
        assert_int_equal(seen.count, 2);
        free(data);
}

/* A commit cut short after member 0's rename: the others are still under their temporary
 * names. Readers use them; fsck renames them into place. */
static void test_stripe_commit_cut_short_reads_from_temporary_names(void **state)
{
        struct fixture *f = *state;
        uint8_t *data = random_bytes(300000);
        struct ds_stripe_info info;
        struct ds_error err;
        char hex[2 * DS_STRIPE_SET_ID_SIZE + 1], from[160], to[200];

        put_file(f, 4, 8192, "cut", data, 300000);
        assert_int_equal(ds_stripe_verify(f->dirs, 4, "cut", true, &info, &err), 0);
        for (unsigned i = 0; i < DS_STRIPE_SET_ID_SIZE; i++)
                snprintf(hex + 2 * i, 3, "%02x", info.set_id[i]);
        for (unsigned i = 1; i < 4; i++) {
                member_path(f, i, "cut", from);
                snprintf(to, sizeof(to), "%s/%s%s.cut", f->dirs[i], DS_STRIPE_TMP_PREFIX, hex);
                assert_int_equal(rename(from, to), 0);
        }
        assert_int_equal(ds_stripe_verify(f->dirs, 4, "cut", true, NULL, &err), 0);
        expect_contents(f, 4, "cut", data, 300000);
        assert_int_equal(ds_stripe_fsck(f->dirs, 4, NULL, NULL, &err), 3);
        member_path(f, 3, "cut", from);
        assert_int_equal(access(from, F_OK), 0);
        assert_int_equal(access(to, F_OK), -1);
        expect_contents(f, 4, "cut", data, 300000);
        free(data);
}

static void test_stripe_fifo_member_is_refused_without_blocking(void **state)
{
        struct fixture *f = *state;
        uint8_t *data = random_bytes(50000);
        struct ds_stripe *s;
        struct ds_error err;
        char path[160];

        put_file(f, 2, 4096, "p", data, 50000);
        member_path(f, 1, "p", path);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(mkfifo(path, 0600), 0);
        assert_int_equal(ds_stripe_open(&s, f->dirs, 2, "p", NULL, &err), -EINVAL);
        assert_non_null(strstr(err.text, "is not a regular file"));
        assert_int_equal(ds_stripe_unlink(f->dirs, 2, "p", &err), 1); /* member 0 only */
        assert_int_equal(access(path, F_OK), 0);                      /* the FIFO stays */
        free(data);
}

static void test_stripe_stream_buffers_stay_within_the_budget(void **state)
{
        struct fixture *f = *state;
        struct ds_stripe_options big = {.unit = 1u << 30, .mem_budget = 1u << 20};
        struct ds_stripe_options tiny = {.mem_budget = 8192};
        uint8_t *data = random_bytes(100000);
        struct ds_stripe *s;
        struct ds_pool *pool;
        struct ds_error err;

        assert_int_equal(ds_stripe_create(&s, f->dirs, 4, "big", &big, &err), 0);
        assert_int_equal(ds_stripe_stream_pool(s, &pool, &err), 0);
        assert_true(ds_pool_buf_size(pool) * ds_pool_count(pool) <= big.mem_budget);
        ds_pool_destroy(pool);
        assert_int_equal(ds_stripe_close(s, &err), 0);

        put_file(f, 4, 65536, "small", data, 100000);
        assert_int_equal(ds_stripe_open(&s, f->dirs, 4, "small", NULL, &err), 0);
        assert_int_equal(ds_stripe_stream_pool(s, &pool, &err), 0);
        assert_int_equal(ds_pool_buf_size(pool), 102400); /* the file, rounded up to 4K */
        ds_pool_destroy(pool);
        assert_int_equal(ds_stripe_close(s, &err), 0);

        assert_int_equal(ds_stripe_open(&s, f->dirs, 4, "small", &tiny, &err), 0);
        assert_int_equal(ds_stripe_stream_pool(s, &pool, &err), -ENOMEM);
        assert_non_null(strstr(err.text, "too small for 4 buffers"));
        assert_int_equal(ds_stripe_close(s, &err), 0);
        free(data);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_stripe_random_sizes_units_widths_read_back_exact,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_stripe_random_writes_and_truncate_match_model,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_stripe_damaged_members_are_named, setup, teardown),
            cmocka_unit_test_setup_teardown(test_stripe_directories_out_of_order_are_named, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_stripe_corrupt_data_fails_the_checksum, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_stripe_uncommitted_file_leaves_nothing, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_stripe_rejects_bad_arguments, setup, teardown),
            cmocka_unit_test_setup_teardown(test_stripe_unaligned_buffers_and_offsets, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_stripe_scan_reports_ok_damaged_partial_and_hidden,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_stripe_commit_cut_short_reads_from_temporary_names,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_stripe_fifo_member_is_refused_without_blocking,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_stripe_stream_buffers_stay_within_the_budget,
                                            setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
