/* The reporter: final JSON fields and order, the text line, interval reports, the ticker. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <dragstrip/report.h>

#include "json_check.h"

struct fixture {
        struct ds_live *live;
        struct ds_live_segment *seg;
        FILE *out;
        char text[4096];
};

static int setup(void **state)
{
        struct fixture *f = calloc(1, sizeof(*f));
        if (!f || ds_live_open(&f->live, "blast", "send", "raw", NULL, NULL) != 0)
                return -1;
        f->seg = ds_live_segment(f->live);
        f->out = tmpfile();
        if (!f->out)
                return -1;
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;
        ds_live_close(f->live);
        fclose(f->out);
        free(f);
        return 0;
}

/* Everything written to the report's file so far. */
static const char *written(struct fixture *f)
{
        assert_int_equal(fflush(f->out), 0);
        rewind(f->out);
        size_t n = fread(f->text, 1, sizeof(f->text) - 1, f->out);
        f->text[n] = '\0';
        return f->text;
}

static int count_lines(const char *text)
{
        int lines = 0;
        for (; *text; text++)
                lines += *text == '\n';
        return lines;
}

static void start_report(struct fixture *f, struct ds_report *report, bool json, double interval_s,
                         char unit)
{
        struct ds_report_config config = {
            .tool = "blast",
            .role = "send",
            .link = "raw",
            .msg_size = 65536,
            .json = json,
            .interval_s = interval_s,
            .unit = unit,
            .out = f->out,
        };
        ds_report_init(report, &config, f->seg);
        ds_report_start(report);
}

static void add_extra(struct ds_json *json, void *ctx)
{
        ds_json_str(json, "pages", ctx);
        ds_json_u64(json, "credits", 16);
}

static void add_params(struct ds_json *json, void *ctx)
{
        ds_json_u64(json, "window", *(const unsigned *)ctx);
}

/* A start time as ISO 8601 UTC to the millisecond, within the bounds (Unix ns) given. */
static void assert_start_between(const char *text, uint64_t before_ns, uint64_t after_ns)
{
        char low[DS_UTC_TEXT], high[DS_UTC_TEXT];
        assert_int_equal(strlen(text), strlen("2026-01-31T12:00:00.000Z"));
        assert_int_equal(text[strlen(text) - 1], 'Z');
        /* The text sorts as the time it names. */
        ds_utc_format(low, sizeof(low), before_ns - before_ns % 1000000u);
        ds_utc_format(high, sizeof(high), after_ns);
        assert_true(strcmp(text, low) >= 0 && strcmp(text, high) <= 0);
}

static void test_report_json_has_the_design_fields_in_order(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        struct ds_result result;
        struct jc_doc doc;
        unsigned window = 64;

        uint64_t before_ns = ds_unix_now_ns();
        struct ds_report_config config = {.tool = "blast",
                                          .role = "send",
                                          .link = "raw",
                                          .msg_size = 65536,
                                          .json = true,
                                          .out = f->out,
                                          .params = add_params,
                                          .params_ctx = &window};
        ds_report_init(&report, &config, f->seg);
        ds_report_start(&report);
        uint64_t after_ns = ds_unix_now_ns();
        ds_live_add(f->seg, 1000, 1000 * 65536ull);
        ds_live_fault(f->seg, DS_FAULT_DUP, 3);
        ds_report_finish_at(&report, report.start_ns + 2000000000u, &result);
        ds_report_print(&report, &result, add_extra, "hugetlb");

        const char *text = written(f);
        if (!jc_parse_line(text, &doc))
                fail_msg("not one JSON line: %s", text);
        static const char *const order[] = {"tool",
                                            "role",
                                            "link",
                                            "version",
                                            "start",
                                            "msg_size",
                                            "messages",
                                            "bytes",
                                            "seconds",
                                            "MB_per_s",
                                            "Gbit_per_s",
                                            "cpu_user_s",
                                            "cpu_sys_s",
                                            "errors",
                                            "errors.lost",
                                            "errors.dup",
                                            "errors.reordered",
                                            "errors.corrupt",
                                            "errors.malformed",
                                            "params",
                                            "params.interval_s",
                                            "params.window",
                                            "pages",
                                            "credits"};
        assert_int_equal(doc.count, sizeof(order) / sizeof(order[0]));
        for (int i = 0; i < doc.count; i++)
                assert_string_equal(doc.members[i].path, order[i]);
        assert_string_equal(jc_find(&doc, "tool")->value, "blast");
        assert_string_equal(jc_find(&doc, "role")->value, "send");
        assert_string_equal(jc_find(&doc, "link")->value, "raw");
        assert_string_equal(jc_find(&doc, "version")->value, DS_VERSION);
        assert_start_between(jc_find(&doc, "start")->value, before_ns, after_ns);
        assert_string_equal(jc_find(&doc, "msg_size")->value, "65536");
        assert_string_equal(jc_find(&doc, "messages")->value, "1000");
        assert_string_equal(jc_find(&doc, "bytes")->value, "65536000");
        assert_string_equal(jc_find(&doc, "seconds")->value, "2");
        assert_string_equal(jc_find(&doc, "MB_per_s")->value, "32.768");
        assert_string_equal(jc_find(&doc, "Gbit_per_s")->value, "0.262144");
        assert_int_equal(jc_find(&doc, "cpu_user_s")->type, 'n');
        assert_string_equal(jc_find(&doc, "errors.dup")->value, "3");
        assert_string_equal(jc_find(&doc, "errors.lost")->value, "0");
        assert_string_equal(jc_find(&doc, "params.interval_s")->value, "0");
        assert_string_equal(jc_find(&doc, "params.window")->value, "64");
        assert_string_equal(jc_find(&doc, "pages")->value, "hugetlb");
        assert_true(result.MB_per_s == 32.768);
        assert_int_equal(result.counters.faults[DS_FAULT_DUP], 3);
}

static void test_report_text_line_names_bytes_rate_messages_and_cpu(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        struct ds_result result;

        start_report(f, &report, false, 0, 0);
        ds_live_add(f->seg, 16, 16 * 65536ull);
        ds_report_finish_at(&report, report.start_ns + 1000000000u, &result);
        ds_report_print(&report, &result, add_extra, "ignored in text");

        const char *text = written(f);
        assert_int_equal(count_lines(text), 1);
        assert_memory_equal(text,
                            "blast-send: 1048576 bytes in 1.000 s = 1.05 MB/s = 0.01 Gbit/s, "
                            "16 messages of 64K, cpu ",
                            strlen("blast-send: 1048576 bytes in 1.000 s = 1.05 MB/s = 0.01 "
                                   "Gbit/s, 16 messages of 64K, cpu "));
        assert_non_null(strstr(text, "s user "));
        assert_non_null(strstr(text, "s sys\n"));
        assert_null(strstr(text, "errors"));
}

static void test_report_marks_an_interrupted_run_in_text_and_json(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        struct ds_result result;

        start_report(f, &report, false, 0, 0);
        ds_live_add(f->seg, 1, 1024);
        ds_report_finish_at(&report, report.start_ns + 1000000000u, &result);
        result.interrupted = true;
        ds_report_print(&report, &result, NULL, NULL);
        assert_non_null(strstr(written(f), "s sys, interrupted\n"));

        start_report(f, &report, true, 0, 0);
        ds_report_finish_at(&report, report.start_ns + 1000000000u, &result);
        result.interrupted = true;
        ds_report_print(&report, &result, NULL, NULL);
        assert_non_null(strstr(written(f), "\"interrupted\":true"));
}

static void test_report_cpu_a_peer_did_not_say_is_unknown_and_null(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        struct ds_result result = {.seconds = 1, .cpu = {.user_s = NAN, .sys_s = NAN}};

        start_report(f, &report, false, 0, 0);
        ds_report_print(&report, &result, NULL, NULL);
        assert_non_null(strstr(written(f), " messages of 64K, cpu unknown\n"));
        start_report(f, &report, true, 0, 0);
        ds_report_print(&report, &result, NULL, NULL);
        assert_non_null(strstr(written(f), "\"cpu_user_s\":null,\"cpu_sys_s\":null"));
}

static void test_report_text_lists_errors_only_when_there_are_some(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        struct ds_result result;

        start_report(f, &report, false, 0, 'K');
        ds_live_add(f->seg, 1, 1024);
        ds_live_fault(f->seg, DS_FAULT_LOST, 5);
        ds_live_fault(f->seg, DS_FAULT_MALFORMED, 1);
        ds_report_finish_at(&report, report.start_ns + 1000000000u, &result);
        ds_report_print(&report, &result, NULL, NULL);

        const char *text = written(f);
        assert_non_null(strstr(text, "= 1.00 KB/sec,"));
        assert_non_null(strstr(text, ", errors: lost 5 dup 0 reordered 0 corrupt 0 malformed 1\n"));
}

static void test_report_defaults_to_stdout_and_unit_a(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        struct ds_report_config config = {.tool = "ttcp", .role = "recv", .link = "tcp"};
        ds_report_init(&report, &config, f->seg);
        assert_ptr_equal(report.config.out, stdout);
        assert_int_equal(report.config.unit, 'a');
        ds_report_start(&report);
        assert_int_equal(ds_report_next_due(&report), UINT64_MAX);
}

static void test_report_without_interval_never_ticks(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        start_report(f, &report, false, 0, 0);
        ds_live_add(f->seg, 1, 1);
        ds_report_tick(&report);
        assert_int_equal(ds_report_next_due(&report), UINT64_MAX);
        assert_string_equal(written(f), "");
}

static void test_report_ticks_once_per_interval_and_merges_missed_ones(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        const uint64_t step = 50000000u; /* 50 ms */

        start_report(f, &report, false, 0.05, 0);
        assert_int_equal(ds_report_next_due(&report), report.start_ns + step);
        ds_report_tick(&report); /* not due yet */
        assert_string_equal(written(f), "");

        ds_live_add(f->seg, 10, 5000);
        ds_sleep_until(ds_report_next_due(&report));
        ds_report_tick(&report);
        ds_report_tick(&report); /* the same interval does not print twice */
        assert_int_equal(count_lines(written(f)), 1);
        assert_memory_equal(f->text, "[  0.00-", 8);
        assert_non_null(strstr(f->text, "         5000 bytes  "));

        /* Busy for about three intervals: one line covers them, and the schedule stays
         * on its grid, due after now. */
        uint64_t late = report.start_ns + 4 * step + step / 2;
        ds_sleep_until(late);
        ds_live_add(f->seg, 1, 700);
        ds_report_tick(&report);
        assert_int_equal(count_lines(written(f)), 2);
        assert_non_null(strstr(f->text, "          700 bytes  "));
        uint64_t due = ds_report_next_due(&report);
        assert_true(due > late);
        assert_int_equal((due - report.start_ns) % step, 0);
}

static void test_report_interval_lines_are_json_with_the_interval_bytes(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        struct jc_doc doc;

        ds_live_add(f->seg, 99, 99); /* before start: not part of any interval */
        ds_live_fault(f->seg, DS_FAULT_LOST, 5);
        start_report(f, &report, true, 0.02, 0);
        ds_live_add(f->seg, 4, 4000000);
        ds_live_fault(f->seg, DS_FAULT_LOST, 2);
        ds_sleep_until(ds_report_next_due(&report));
        ds_report_tick(&report);

        const char *text = written(f);
        if (!jc_parse_line(text, &doc))
                fail_msg("not one JSON line: %s", text);
        static const char *const order[] = {"tool",           "role",
                                            "link",           "version",
                                            "start",          "msg_size",
                                            "interval",       "interval.start",
                                            "interval.end",   "messages",
                                            "bytes",          "seconds",
                                            "MB_per_s",       "Gbit_per_s",
                                            "cpu_user_s",     "cpu_sys_s",
                                            "errors",         "errors.lost",
                                            "errors.dup",     "errors.reordered",
                                            "errors.corrupt", "errors.malformed"};
        assert_int_equal(doc.count, sizeof(order) / sizeof(order[0]));
        for (int i = 0; i < doc.count; i++)
                assert_string_equal(doc.members[i].path, order[i]);
        assert_string_equal(jc_find(&doc, "interval.start")->value, "0");
        double end = strtod(jc_find(&doc, "interval.end")->value, NULL);
        assert_true(end >= 0.02 && end < 1.0);
        assert_string_equal(jc_find(&doc, "bytes")->value, "4000000");
        assert_string_equal(jc_find(&doc, "messages")->value, "4");
        double mb = strtod(jc_find(&doc, "MB_per_s")->value, NULL);
        assert_true(mb > 3.9 && mb <= 4.0 / 0.02);
        assert_true(strtod(jc_find(&doc, "seconds")->value, NULL) == end);
        assert_string_equal(jc_find(&doc, "errors.lost")->value, "2"); /* the interval's */
        assert_int_equal(jc_find(&doc, "cpu_user_s")->type, 'n');
}

static void test_report_start_at_dates_every_object_from_the_run_begun_earlier(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        struct ds_result result;
        struct jc_doc doc;
        const uint64_t early_ns = 3000000000u; /* the run began 3 s before it was known */

        start_report(f, &report, true, 0, 0);
        uint64_t before_ns = ds_unix_now_ns();
        uint64_t now = ds_now_ns();
        ds_report_start_at(&report, now - early_ns);
        uint64_t after_ns = ds_unix_now_ns();
        ds_report_finish_at(&report, now, &result);
        assert_true(result.seconds == 3.0);
        ds_report_print(&report, &result, NULL, NULL);
        const char *text = written(f);
        if (!jc_parse_line(text, &doc))
                fail_msg("not one JSON line: %s", text);
        assert_start_between(jc_find(&doc, "start")->value, before_ns - early_ns,
                             after_ns - early_ns);
}

static void test_report_finish_guards_a_zero_length_run(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        struct ds_result result;
        start_report(f, &report, false, 0, 0);
        ds_live_add(f->seg, 1, 100);
        ds_report_finish_at(&report, report.start_ns, &result);
        assert_true(result.seconds == 0);
        assert_true(result.MB_per_s == 0 && result.Gbit_per_s == 0);
        ds_report_finish(&report, &result);
        assert_true(result.seconds >= 0);
        assert_int_equal(result.counters.bytes, 100);
}

static void test_report_ticker_reports_each_interval_until_stopped(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        struct ds_report_ticker *ticker;

        start_report(f, &report, true, 0.04, 0);
        assert_int_equal(ds_report_ticker_start(&report, &ticker), 0);
        assert_non_null(ticker);
        ds_live_add(f->seg, 1, 1000);
        ds_sleep_until(report.start_ns + 150000000u); /* reports due at 40, 80, 120 ms */
        ds_report_ticker_stop(ticker);
        int lines = count_lines(written(f));
        assert_true(lines >= 2 && lines <= 4);

        ds_sleep_until(ds_now_ns() + 100000000u);
        assert_int_equal(count_lines(written(f)), lines); /* stopped means silent */
}

static void test_report_ticker_stops_at_once_not_at_the_next_report(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        struct ds_report_ticker *ticker;

        start_report(f, &report, true, 60, 0);
        assert_int_equal(ds_report_ticker_start(&report, &ticker), 0);
        uint64_t t0 = ds_now_ns();
        ds_report_ticker_stop(ticker);
        assert_true(ds_now_ns() - t0 < 50000000u);
        assert_string_equal(written(f), "");
}

static void test_report_ticker_without_interval_starts_no_thread(void **state)
{
        struct fixture *f = *state;
        struct ds_report report;
        struct ds_report_ticker *ticker;

        start_report(f, &report, true, 0, 0);
        assert_int_equal(ds_report_ticker_start(&report, &ticker), 0);
        assert_null(ticker);
        ds_report_ticker_stop(ticker);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_report_json_has_the_design_fields_in_order, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_report_text_line_names_bytes_rate_messages_and_cpu,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_report_marks_an_interrupted_run_in_text_and_json,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_report_cpu_a_peer_did_not_say_is_unknown_and_null,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_report_text_lists_errors_only_when_there_are_some,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_report_defaults_to_stdout_and_unit_a, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_report_without_interval_never_ticks, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(
                test_report_ticks_once_per_interval_and_merges_missed_ones, setup, teardown),
            cmocka_unit_test_setup_teardown(
                test_report_interval_lines_are_json_with_the_interval_bytes, setup, teardown),
            cmocka_unit_test_setup_teardown(
                test_report_start_at_dates_every_object_from_the_run_begun_earlier, setup,
                teardown),
            cmocka_unit_test_setup_teardown(test_report_finish_guards_a_zero_length_run, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_report_ticker_reports_each_interval_until_stopped,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_report_ticker_stops_at_once_not_at_the_next_report,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_report_ticker_without_interval_starts_no_thread,
                                            setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
