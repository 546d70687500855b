/* core/: errors, random numbers, parsing, tables, atomic files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/table.h"
#include "core/tl.h"

static void error_line_names_what_and_why(void **state)
{
    (void)state;
    tl_clear_error();
    assert_string_equal(tl_last_error(), "");
    int rc = tl_error(TL_EUSAGE, "--tokens", "%d is out of range", -3);
    assert_int_equal(rc, TL_EUSAGE);
    assert_string_equal(tl_last_error(), "--tokens: -3 is out of range");
}

static void rng_is_deterministic_and_uniform(void **state)
{
    (void)state;
    tl_rng a, b;
    tl_rng_seed(&a, 42);
    tl_rng_seed(&b, 42);
    for (int i = 0; i < 1000; i++) assert_true(tl_rng_u64(&a) == tl_rng_u64(&b));
    tl_rng_seed(&b, 43);
    assert_true(tl_rng_u64(&a) != tl_rng_u64(&b));

    /* moments of 200k draws: mean and variance of each distribution within 5 sigma */
    const int n = 200000;
    double su = 0, sn = 0, sn2 = 0, sl = 0, sl2 = 0;
    int counts[10] = {0};
    for (int i = 0; i < n; i++) {
        double u = tl_rng_uniform(&a);
        assert_true(u >= 0.0 && u < 1.0);
        su += u;
        double z = tl_rng_normal(&a);
        sn += z;
        sn2 += z * z;
        double l = tl_rng_laplace(&a);
        sl += l;
        sl2 += l * l;
        counts[tl_rng_below(&a, 10)]++;
    }
    assert_true(fabs(su / n - 0.5) < 5 * sqrt(1.0 / 12 / n));
    assert_true(fabs(sn / n) < 5 / sqrt(n));
    assert_true(fabs(sn2 / n - 1.0) < 5 * sqrt(2.0 / n));
    assert_true(fabs(sl / n) < 5 / sqrt(n));
    assert_true(fabs(sl2 / n - 1.0) < 5 * sqrt(5.0 / n)); /* Laplace 4th moment 6 b^4 = 1.5 */
    for (int i = 0; i < 10; i++) assert_true(abs(counts[i] - n / 10) < 5 * 134);
}

static void parse_rejects_bad_numbers(void **state)
{
    (void)state;
    long v;
    assert_int_equal(tl_parse_long("12", 1, 100, "--n", &v), TL_OK);
    assert_int_equal(v, 12);
    assert_int_equal(tl_parse_long("-1", 1, 100, "--n", &v), TL_EUSAGE);
    assert_int_equal(tl_parse_long("12x", 1, 100, "--n", &v), TL_EUSAGE);
    assert_int_equal(tl_parse_long("", 1, 100, "--n", &v), TL_EUSAGE);
    assert_int_equal(tl_parse_long("99999999999999999999999", 1, 100, "--n", &v), TL_EUSAGE);
    long list[8];
    int count;
    assert_int_equal(tl_parse_long_list("1,8,32", 1, 1L << 31, "--tokens", list, 8, &count), TL_OK);
    assert_int_equal(count, 3);
    assert_int_equal(list[2], 32);
    assert_int_equal(tl_parse_long_list("1,,8", 1, 100, "--tokens", list, 8, &count), TL_EUSAGE);
    assert_int_equal(tl_parse_long_list("8,", 1, 100, "--tokens", list, 8, &count), TL_EUSAGE);
    assert_int_equal(tl_parse_long_list(",8", 1, 100, "--tokens", list, 8, &count), TL_EUSAGE);
    assert_int_equal(tl_parse_long_list("1,0", 1, 100, "--tokens", list, 8, &count), TL_EUSAGE);
    assert_int_equal(tl_parse_long_list("1,2,3", 1, 100, "--tokens", list, 2, &count), TL_EUSAGE);
    double d;
    assert_int_equal(tl_parse_double("nan", "--x", &d), TL_EUSAGE);
    assert_int_equal(tl_parse_double("0x1p-3", "--x", &d), TL_EUSAGE); /* decimal only */
    assert_int_equal(tl_parse_double("0.125", "--x", &d), TL_OK);
    assert_true(d == 0.125);
    tl_format f;
    assert_int_equal(tl_parse_format("xml", &f), TL_EUSAGE);
    assert_int_equal(tl_parse_format("csv", &f), TL_OK);
    assert_int_equal(f, TL_FMT_CSV);
}

/* The one number reader: decimal only, no blanks, no '+', the whole string, range checked. */
static void number_reader_has_one_rule(void **state)
{
    (void)state;
    long long i = 7;
    static const char *const bad_int[] = {" 5", "5 ", "+5", "0x10", "010x", "", "-", "5e3", "5.0", "1,000", "\t5",
                                          "5\n", "inf", NULL};
    for (int k = 0; bad_int[k]; k++) assert_int_equal(tl_scan_int(bad_int[k], &i), TL_NUM_SYNTAX);
    assert_int_equal(i, 7); /* left alone when refused */
    assert_int_equal(tl_scan_int("-42", &i), TL_NUM_OK);
    assert_int_equal(i, -42);
    assert_int_equal(tl_scan_int("010", &i), TL_NUM_OK); /* decimal: not octal 8 */
    assert_int_equal(i, 10);
    assert_int_equal(tl_scan_int("9223372036854775808", &i), TL_NUM_RANGE);
    uint64_t u = 0;
    assert_int_equal(tl_scan_u64("18446744073709551615", &u), TL_NUM_OK);
    assert_true(u == UINT64_MAX);
    assert_int_equal(tl_scan_u64("18446744073709551616", &u), TL_NUM_RANGE);
    assert_int_equal(tl_scan_u64("-1", &u), TL_NUM_SYNTAX);
    assert_int_equal(tl_scan_u64("0x10", &u), TL_NUM_SYNTAX);
    double d = 3;
    static const char *const bad_real[] = {" 1.5", "1.5 ", "+1.5", "0x1p3", "0x10", "inf", "-inf", "nan", ".", "e5",
                                           "1e", "1e+", "1.5.2", "1,5", "", "--1", "1.5f", NULL};
    for (int k = 0; bad_real[k]; k++) assert_int_equal(tl_scan_real(bad_real[k], &d), TL_NUM_SYNTAX);
    assert_true(d == 3);
    static const struct { const char *s; double v; } good[] = {
        {"1.5", 1.5}, {"-2", -2}, {".5", 0.5}, {"5.", 5}, {"1e3", 1000}, {"1E-3", 1e-3}, {"2.5e+2", 250}, {"0", 0}};
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        assert_int_equal(tl_scan_real(good[k].s, &d), TL_NUM_OK);
        assert_true(d == good[k].v);
    }
    assert_int_equal(tl_scan_real("1e999", &d), TL_NUM_RANGE);
    long long v[3];
    assert_int_equal(tl_scan_ints("64x128x4", 'x', v, 3), 3);
    assert_true(v[0] == 64 && v[1] == 128 && v[2] == 4);
    assert_int_equal(tl_scan_ints("64x+128x4", 'x', v, 3), 0);
    assert_int_equal(tl_scan_ints("64x 128x4", 'x', v, 3), 0);
    assert_int_equal(tl_scan_ints("64xx4", 'x', v, 3), 0);
    assert_int_equal(tl_scan_ints("1x2x3x4", 'x', v, 3), 0);
    const char bom[] = "\xef\xbb\xbf" "abc";
    assert_string_equal(tl_skip_bom(bom), "abc");
    assert_string_equal(tl_skip_bom("abc"), "abc");
}

static char *print_to_string(const tl_table *t, tl_format fmt)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tl_table_print(t, fmt, "title", f);
    fclose(f);
    return buf;
}

static void table_prints_three_formats(void **state)
{
    (void)state;
    tl_table *t = tl_table_new("tokens,limiter,time_us");
    tl_table_row(t);
    tl_table_int(t, 8);
    tl_table_str(t, "hbm, mostly");
    tl_table_numf(t, "%.2f", 12.5);
    tl_table_row(t);
    tl_table_int(t, 16);
    tl_table_str(t, "matrix");
    tl_table_num(t, INFINITY);
    assert_int_equal(tl_table_rows(t), 2);
    assert_int_equal(tl_table_cols(t), 3);
    assert_string_equal(tl_table_cell(t, 1, 1), "matrix");

    char *csv = print_to_string(t, TL_FMT_CSV);
    assert_string_equal(csv, "tokens,limiter,time_us\n8,\"hbm, mostly\",12.50\n16,matrix,inf\n");
    free(csv);
    char *json = print_to_string(t, TL_FMT_JSON);
    assert_non_null(strstr(json, "\"tokens\": 8"));
    assert_non_null(strstr(json, "\"time_us\": 12.5"));
    assert_non_null(strstr(json, "\"time_us\": \"inf\""));
    free(json);
    char *text = print_to_string(t, TL_FMT_TABLE);
    assert_non_null(strstr(text, "title\n"));
    assert_non_null(strstr(text, "matrix"));
    free(text);
    tl_table_free(t);
}

/* A cell with no value: "-" for people, empty in CSV, null in JSON; a JSON form a caller can nest. */
static void table_cell_without_value(void **state)
{
    (void)state;
    tl_table *t = tl_table_new("kernel,target");
    tl_table_row(t);
    tl_table_str(t, "encode");
    tl_table_none(t);
    char *csv = print_to_string(t, TL_FMT_CSV);
    assert_string_equal(csv, "kernel,target\nencode,\n");
    free(csv);
    char *json = print_to_string(t, TL_FMT_JSON);
    assert_non_null(strstr(json, "\"target\": null"));
    free(json);
    char *text = print_to_string(t, TL_FMT_TABLE);
    assert_non_null(strstr(text, "encode       -\n"));
    free(text);
    json_t *arr = tl_table_to_json(t);
    assert_int_equal(json_array_size(arr), 1);
    assert_true(json_is_null(json_object_get(json_array_get(arr, 0), "target")));
    json_decref(arr);
    tl_table_free(t);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int file_is(const char *path, const char *text)
{
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strcmp(buf, text) == 0;
}

static void atomic_file_is_all_or_nothing(void **state)
{
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/tl_atomic_test_%ld.txt", TL_BINARY_DIR, (long)getpid());
    tl_atomic a;
    assert_int_equal(tl_atomic_begin(&a, path), TL_OK);
    fputs("half", tl_atomic_file(&a));
    tl_atomic_abort(&a);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(access(a.tmp, F_OK), -1);

    assert_int_equal(tl_atomic_begin(&a, path), TL_OK);
    char tmp[sizeof a.tmp];
    strcpy(tmp, a.tmp);
    fputs("whole", tl_atomic_file(&a));
    assert_int_equal(tl_atomic_close(&a, "the test"), TL_OK);
    assert_int_equal(tl_atomic_commit(&a), TL_OK);
    assert_true(file_is(path, "whole"));
    assert_int_equal(access(tmp, F_OK), -1);
    struct stat st;
    const mode_t um = umask(022);
    umask(um);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0666 & ~um); /* a new file: the umask's mode, not mkstemp's 0600 */
    remove(path);
    assert_int_equal(tl_atomic_begin(&a, ""), TL_EUSAGE);
}

/* The temporary name cannot be guessed and is never an existing name: a symbolic link planted at
 * the name the writer used to take ("<path>.tmp.<pid>") is neither followed nor removed, its
 * target keeps its contents, and two writers at once get two names. */
static void atomic_temp_is_new_and_unguessable(void **state)
{
    (void)state;
    char path[256], planted[300], victim[256];
    snprintf(path, sizeof path, "%s/tl_atomic_link_%ld.txt", TL_BINARY_DIR, (long)getpid());
    snprintf(planted, sizeof planted, "%s.tmp.%ld", path, (long)getpid());
    snprintf(victim, sizeof victim, "%s/tl_atomic_victim_%ld.txt", TL_BINARY_DIR, (long)getpid());
    write_text(victim, "victim");
    assert_int_equal(symlink(victim, planted), 0);
    tl_atomic a, b;
    assert_int_equal(tl_atomic_begin(&a, path), TL_OK);
    assert_int_equal(tl_atomic_begin(&b, path), TL_OK);
    assert_string_not_equal(a.tmp, planted);
    assert_string_not_equal(a.tmp, b.tmp);
    struct stat st;
    assert_int_equal(lstat(a.tmp, &st), 0);
    assert_true(S_ISREG(st.st_mode) && st.st_nlink == 1 && (st.st_mode & 0077) == 0); /* ours, 0600 */
    tl_atomic_abort(&b);
    fputs("written", tl_atomic_file(&a));
    assert_int_equal(tl_atomic_commit(&a), TL_OK);
    assert_true(file_is(path, "written"));
    assert_true(file_is(victim, "victim"));
    assert_int_equal(lstat(planted, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    remove(planted), remove(victim), remove(path);
}

/* Every write error reaches tl_atomic_close with its reason: a full device (written straight
 * through) says ENOSPC; past a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored as the command does
 * at startup) the temporary file says EFBIG and is removed, and the old file is kept. The limit is
 * set in a child process. */
static void atomic_close_reports_write_errors(void **state)
{
    (void)state;
    tl_atomic a;
    if (access("/dev/full", W_OK) == 0) {
        assert_int_equal(tl_atomic_begin(&a, "/dev/full"), TL_OK);
        assert_true(a.direct);
        fputs("x", tl_atomic_file(&a));
        assert_int_equal(tl_atomic_close(&a, "the test"), TL_EFAIL);
        assert_string_equal(tl_last_error(), "/dev/full: cannot write the test: No space left on device");
        assert_true(tl_last_error_is_write());
        assert_int_equal(tl_atomic_commit(&a), TL_EFAIL);
    }
    char path[256];
    snprintf(path, sizeof path, "%s/tl_atomic_fsize_%ld.txt", TL_BINARY_DIR, (long)getpid());
    write_text(path, "old");
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tl_ignore_sigxfsz();
        struct rlimit lim = {4096, 4096};
        int ok = setrlimit(RLIMIT_FSIZE, &lim) == 0 && tl_atomic_begin(&a, path) == TL_OK;
        char tmp[sizeof a.tmp];
        strcpy(tmp, a.tmp);
        for (int i = 0; ok && i < 10000; i++) fputs("0123456789", tl_atomic_file(&a));
        ok = ok && tl_atomic_close(&a, "the test") == TL_EFAIL && access(tmp, F_OK) != 0 &&
             strstr(tl_last_error(), "cannot write the test: File too large") != NULL &&
             tl_atomic_commit(&a) == TL_EFAIL;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(file_is(path, "old"));
    remove(path);
}

/* One file: the same inode (a hard link, a symbolic link, another spelling of the folder), or for
 * names that do not exist yet the same resolved folder and last component. */
static void same_file_by_inode_or_name(void **state)
{
    (void)state;
    char a[256], hard[256], soft[256], spelled[300], none1[300], none2[300];
    snprintf(a, sizeof a, "%s/tl_same_%ld.txt", TL_BINARY_DIR, (long)getpid());
    snprintf(hard, sizeof hard, "%s/tl_same_hard_%ld.txt", TL_BINARY_DIR, (long)getpid());
    snprintf(soft, sizeof soft, "%s/tl_same_soft_%ld.txt", TL_BINARY_DIR, (long)getpid());
    snprintf(spelled, sizeof spelled, "%s/./tests/../tl_same_%ld.txt", TL_BINARY_DIR, (long)getpid());
    snprintf(none1, sizeof none1, "%s/tl_same_none_%ld.txt", TL_BINARY_DIR, (long)getpid());
    snprintf(none2, sizeof none2, "%s/tests/../tl_same_none_%ld.txt", TL_BINARY_DIR, (long)getpid());
    write_text(a, "a");
    assert_int_equal(link(a, hard), 0);
    assert_int_equal(symlink(a, soft), 0);
    assert_true(tl_same_file(a, a) && tl_same_file(a, hard) && tl_same_file(soft, a) && tl_same_file(spelled, a));
    assert_true(tl_same_file(none1, none2));
    assert_false(tl_same_file(a, none1));
    assert_false(tl_same_file(none1, TL_BINARY_DIR "/tl_same_other.txt"));
    remove(a), remove(hard), remove(soft);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(error_line_names_what_and_why),
        cmocka_unit_test(rng_is_deterministic_and_uniform),
        cmocka_unit_test(parse_rejects_bad_numbers),
        cmocka_unit_test(number_reader_has_one_rule),
        cmocka_unit_test(table_prints_three_formats),
        cmocka_unit_test(table_cell_without_value),
        cmocka_unit_test(atomic_file_is_all_or_nothing),
        cmocka_unit_test(atomic_temp_is_new_and_unguessable),
        cmocka_unit_test(atomic_close_reports_write_errors),
        cmocka_unit_test(same_file_by_inode_or_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
