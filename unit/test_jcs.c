/* SPDX-License-Identifier: MIT */
/* Canonical JSON (pybox/jcs.c) against RFC 8785's own examples: its IEEE 754 number
 * table (Appendix B), its worked example (3.2.2.3) and its member order (3.2.3). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../pybox/jcs.h"
#include "suites.h"

static double from_bits(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* RFC 8785 Appendix B: the double (by its bits) and its canonical text. */
static const struct {
    uint64_t bits;
    const char *text;
} appendix_b[] = {
    {0x0000000000000000ULL, "0"},
    {0x8000000000000000ULL, "0"},
    {0x0000000000000001ULL, "5e-324"},
    {0x8000000000000001ULL, "-5e-324"},
    {0x7fefffffffffffffULL, "1.7976931348623157e+308"},
    {0xffefffffffffffffULL, "-1.7976931348623157e+308"},
    {0x4340000000000000ULL, "9007199254740992"},
    {0xc340000000000000ULL, "-9007199254740992"},
    {0x4430000000000000ULL, "295147905179352830000"},
    {0x44b52d02c7e14af5ULL, "9.999999999999997e+22"},
    {0x44b52d02c7e14af6ULL, "1e+23"},
    {0x44b52d02c7e14af7ULL, "1.0000000000000001e+23"},
    {0x444b1ae4d6e2ef4eULL, "999999999999999700000"},
    {0x444b1ae4d6e2ef4fULL, "999999999999999900000"},
    {0x444b1ae4d6e2ef50ULL, "1e+21"},
    {0x3eb0c6f7a0b5ed8cULL, "9.999999999999997e-7"},
    {0x3eb0c6f7a0b5ed8dULL, "0.000001"},
    {0x41b3de4355555553ULL, "333333333.3333332"},
    {0x41b3de4355555554ULL, "333333333.33333325"},
    {0x41b3de4355555555ULL, "333333333.3333333"},
    {0x41b3de4355555556ULL, "333333333.3333334"},
    {0x41b3de4355555557ULL, "333333333.33333343"},
    {0xbecbf647612f3696ULL, "-0.0000033333333333333333"},
    {0x43143ff3c1cb0959ULL, "1424953923781206.2"},
};

START_TEST(numbers_of_appendix_b)
{
    char out[PYBOX_JCS_NUMBER_MAX];
    double d = from_bits(appendix_b[_i].bits);
    ck_assert_int_eq(pybox_jcs_number(d, out), 0);
    ck_assert_str_eq(out, appendix_b[_i].text);
}
END_TEST

START_TEST(numbers_in_text_form)
{
    /* The same rules from numbers as a writer spelled them (3.2.2.3 and ES's limits). */
    static const struct {
        double d;
        const char *text;
    } v[] = {{1e30, "1e+30"},
             {4.50, "4.5"},
             {2e-3, "0.002"},
             {1e-7, "1e-7"},
             {1e-27, "1e-27"},
             {-0.0, "0"},
             {1e21, "1e+21"},
             {1e20, "100000000000000000000"},
             {123e-20, "1.23e-18"},
             {0.1 + 0.2, "0.30000000000000004"},
             {5e-7, "5e-7"},
             {1e-6, "0.000001"},
             {-1.5, "-1.5"},
             {12.3, "12.3"},
             {134217728, "134217728"},
             {0.5, "0.5"},
             {100, "100"},
             {1.5e-323, "1.5e-323"}};
    char out[PYBOX_JCS_NUMBER_MAX];
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        ck_assert_int_eq(pybox_jcs_number(v[i].d, out), 0);
        ck_assert_msg(strcmp(out, v[i].text) == 0, "%.17g: %s, not %s", v[i].d, out, v[i].text);
    }
    /* A power of two whose correctly rounded 16 digits do not read back, but the next
     * 16-digit number up does: 17 digits would not be the shortest. */
    ck_assert_int_eq(pybox_jcs_number(ldexp(1.0, -1017), out), 0);
    ck_assert_str_eq(out, "7.120236347223045e-307");
    ck_assert_int_eq(pybox_jcs_number(ldexp(1.0, -1007), out), 0);
    ck_assert_str_eq(out, "7.291122019556398e-304");
    ck_assert_int_eq(pybox_jcs_number(NAN, out), -1);
    ck_assert_int_eq(pybox_jcs_number(INFINITY, out), -1);
    ck_assert_int_eq(pybox_jcs_number(-INFINITY, out), -1);
}
END_TEST

START_TEST(every_power_of_two_reads_back)
{
    /* The shortest digits at a power of two, where the gap below is half the gap above:
     * each text reads back as its double, and one digit fewer would not. */
    char out[PYBOX_JCS_NUMBER_MAX];
    for (int e = -1074; e <= 1023; e++) {
        double d = ldexp(1.0, e);
        ck_assert_int_eq(pybox_jcs_number(d, out), 0);
        ck_assert_msg(strtod(out, NULL) == d, "2^%d: %s does not read back", e, out);
    }
}
END_TEST

static char *canon(const char *json, const char *skip)
{
    cJSON *v = cJSON_Parse(json);
    ck_assert_ptr_nonnull(v);
    pybox_buf_t b;
    pybox_buf_init(&b, 0);
    pybox_error_t err = {0};
    ck_assert_msg(pybox_jcs_append(&b, v, skip, &err) == 0, "%s", err.msg);
    cJSON_Delete(v);
    return pybox_buf_steal(&b);
}

START_TEST(the_worked_example)
{
    /* RFC 8785 3.2.2.3, as the RFC writes its input. */
    static const char in[] = "{\n"
                             "  \"numbers\": [333333333.33333329, 1E30, 4.50,\n"
                             "                2e-3, 0.000000000000000000000000001],\n"
                             "  \"string\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\",\n"
                             "  \"literals\": [null, true, false]\n"
                             "}";
    static const char want[] = "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],"
                               "\"string\":\"\xe2\x82\xac$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}";
    char *got = canon(in, NULL);
    ck_assert_str_eq(got, want);
    free(got);
}
END_TEST

START_TEST(members_sorted_by_utf16_code_units)
{
    /* RFC 8785 3.2.3: U+1F600 (a surrogate pair, D83D DE00) sorts before U+FB33. */
    static const char in[] = "{\"\\u20ac\": \"Euro Sign\", \"\\r\": \"Carriage Return\", "
                             "\"\\ufb33\": \"Hebrew Letter Dalet With Dagesh\", \"1\": \"One\", "
                             "\"\\ud83d\\ude00\": \"Emoji: Grinning Face\", \"\\u0080\": \"Control\", "
                             "\"\\u00f6\": \"Latin Small Letter O With Diaeresis\"}";
    static const char want[] = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\xc2\x80\":\"Control\","
                               "\"\xc3\xb6\":\"Latin Small Letter O With Diaeresis\",\"\xe2\x82\xac\":\"Euro Sign\","
                               "\"\xf0\x9f\x98\x80\":\"Emoji: Grinning Face\","
                               "\"\xef\xac\xb3\":\"Hebrew Letter Dalet With Dagesh\"}";
    char *got = canon(in, NULL);
    ck_assert_str_eq(got, want);
    free(got);
    /* A name that is a prefix of another sorts first; nested objects are sorted too. */
    got = canon("{\"b\":{\"z\":1,\"a\":[{\"y\":2,\"x\":3}]},\"ab\":0,\"a\":-0}", NULL);
    ck_assert_str_eq(got, "{\"a\":0,\"ab\":0,\"b\":{\"a\":[{\"x\":3,\"y\":2}],\"z\":1}}");
    free(got);
}
END_TEST

START_TEST(strings_escaped_as_the_rfc_says)
{
    /* Only the two-character escapes of 3.2.2.2 and \u00xx (lowercase) for the other
     * controls; DEL, "/" and everything above U+001F as they are. */
    char *got = canon("[\"\\b\\t\\n\\f\\r\\u0001\\u001f\\u007f/\\u00e9\\\"\\\\\"]", NULL);
    ck_assert_str_eq(got, "[\"\\b\\t\\n\\f\\r\\u0001\\u001f\x7f/\xc3\xa9\\\"\\\\\"]");
    free(got);
    got = canon("  { \"a\" : [ ] , \"b\" : { } , \"c\" : \"\" }  ", NULL);
    ck_assert_str_eq(got, "{\"a\":[],\"b\":{},\"c\":\"\"}");
    free(got);
}
END_TEST

START_TEST(a_member_left_out)
{
    char *got = canon("{\"z\":1,\"signature\":{\"alg\":\"x\"},\"a\":{\"signature\":2}}", "signature");
    ck_assert_str_eq(got, "{\"a\":{\"signature\":2},\"z\":1}");
    free(got);
}
END_TEST

START_TEST(no_canonical_form)
{
    pybox_buf_t b;
    pybox_error_t err = {0};
    /* two members of one name */
    cJSON *v = cJSON_Parse("{\"a\":1,\"b\":{\"x\":1,\"x\":2}}");
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_jcs_append(&b, v, NULL, &err), -1);
    ck_assert_msg(strstr(err.msg, "\"x\"") != NULL, "%s", err.msg);
    pybox_buf_free(&b);
    cJSON_Delete(v);
    /* a string that is not UTF-8 */
    pybox_error_clear(&err);
    v = cJSON_CreateString("\xff");
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_jcs_append(&b, v, NULL, &err), -1);
    ck_assert_msg(strstr(err.msg, "UTF-8") != NULL, "%s", err.msg);
    pybox_buf_free(&b);
    cJSON_Delete(v);
    /* a number that is not finite */
    pybox_error_clear(&err);
    v = cJSON_CreateArray();
    cJSON_AddItemToArray(v, cJSON_CreateNumber(NAN));
    pybox_buf_init(&b, 0);
    ck_assert_int_eq(pybox_jcs_append(&b, v, NULL, &err), -1);
    pybox_buf_free(&b);
    cJSON_Delete(v);
    /* out's maximum */
    pybox_error_clear(&err);
    v = cJSON_CreateString("longer than eight bytes");
    pybox_buf_init(&b, 8);
    ck_assert_int_eq(pybox_jcs_append(&b, v, NULL, &err), -1);
    pybox_buf_free(&b);
    cJSON_Delete(v);
}
END_TEST

Suite *suite_jcs(void)
{
    Suite *s = suite_create("jcs");
    TCase *tc = tcase_create("rfc8785");
    tcase_add_loop_test(tc, numbers_of_appendix_b, 0, (int)(sizeof appendix_b / sizeof *appendix_b));
    tcase_add_test(tc, numbers_in_text_form);
    tcase_add_test(tc, every_power_of_two_reads_back);
    tcase_add_test(tc, the_worked_example);
    tcase_add_test(tc, members_sorted_by_utf16_code_units);
    tcase_add_test(tc, strings_escaped_as_the_rfc_says);
    tcase_add_test(tc, a_member_left_out);
    tcase_add_test(tc, no_canonical_form);
    suite_add_tcase(s, tc);
    return s;
}
