/* SPDX-License-Identifier: MIT */
/* pybox mcp: its start-up refusals, then the server driven by clients nobody here wrote
 * (the official MCP TypeScript SDK client and the MCP Inspector's CLI mode), on stdio and
 * over Streamable HTTP (pybox mcp --listen: the SDK's HTTP client, hostile HTTP, nginx in
 * front with TLS), whose tests live in tests/mcp and run with Node's test runner against
 * the real engine. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"
#include "suites.h"

static void refused(const char *const *args, const char *expect)
{
    itest_run_t r;
    itest_pybox("", 0, args, NULL, &r);
    ck_assert_int_eq(r.status, 125);
    ck_assert_msg(r.out_len == 0, "stdout is for protocol messages only, yet: %.*s", (int)r.out_len, r.out);
    ck_assert_msg(itest_contains(r.err, r.err_len, "pybox: refused: "), "no refusal on stderr: %s", r.err);
    ck_assert_msg(itest_contains(r.err, r.err_len, expect), "stderr lacks '%s': %s", expect, r.err);
    itest_run_free(&r);
}

START_TEST(startup_refusals)
{
    refused((const char *[]){"mcp", "--images", "nosuchimage", NULL}, "is not built here");
    refused((const char *[]){"mcp", "--images", "stdlib,stdlib", NULL}, "named twice");
    refused((const char *[]){"mcp", "--images", "stdlib,", NULL}, "separated by commas");
    refused((const char *[]){"mcp", "--images", "../x", NULL}, "not a valid image name");
    refused((const char *[]){"mcp", "--max-timeout", "0.01", NULL}, "--max-timeout: give seconds");
    refused((const char *[]){"mcp", "--max-timeout", "4000", NULL}, "--max-timeout: give seconds from 0.1 to 3600");
    refused((const char *[]){"mcp", "--max-memory", "1M", NULL}, "--max-memory: give a size of at least");
    refused((const char *[]){"mcp", "--max-memory", "1000G", NULL}, "above this installation's ceiling");
    refused((const char *[]){"mcp", "--files-root", "/nonexistent/pybox", NULL}, "is not an existing folder");
    refused((const char *[]){"mcp", "--output-root", "/etc/hostname", NULL}, "is not an existing folder");
    refused((const char *[]){"mcp", "--verbose", NULL}, "unknown option");
    refused((const char *[]){"mcp", "--images", NULL}, "needs a value");
    refused((const char *[]){"mcp", "--python-sessions", "17", NULL},
            "--python-sessions: give how many Python sessions may be live at once");
    refused((const char *[]){"mcp", "--session-ttl", "5", NULL}, "--session-ttl: give seconds from 10 to 86400");
    refused((const char *[]){"mcp", "--session-idle", "1", NULL}, "--session-idle: give seconds from 5 to 86400");
    refused((const char *[]){"mcp", "--warm", "9", NULL}, "--warm: give how many boxes to keep waiting per image");
    refused((const char *[]){"mcp", "--warm-wait", "1", NULL}, "--warm-wait: give seconds from 10 to 3600");
}
END_TEST

/* The installation's ceilings set just below what is asked: every refusal shows the value
 * and the ceiling apart (10.501 s above 10.5 s, not "10.5 s above 10.5 s"), for the
 * server's options and for pybox exec alike. Refused before any box. */
START_TEST(ceilings_shown_exactly)
{
    char home[64], id[33], path[128], env[96];
    ck_assert_int_eq(itest_new_home(home, sizeof home, id), 0);
    snprintf(path, sizeof path, "%s/config.json", home);
    FILE *f = fopen(path, "we");
    ck_assert_ptr_nonnull(f);
    fputs("{\"leftover_expiry_s\": 1, \"max_timeout_s\": 10.5, \"max_memory_mib\": 200.5, \"max_cpus\": 1}\n", f);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(env, sizeof env, "PYBOX_HOME=%s", home);
    const char *const envs[] = {env, NULL};
    static const struct {
        const char *args[6];
        const char *expect;
    } cases[] = {
        {{"mcp", "--max-timeout", "10.501", NULL},
         "--max-timeout: 10.501 s is above this installation's ceiling of 10.5 s"},
        {{"mcp", "--max-timeout", "10", "--max-memory", "205313K", NULL},
         "--max-memory: 205313 KiB is above this installation's ceiling of 205312 KiB"},
        {{"mcp", "--max-timeout", "3600.0001", NULL},
         "--max-timeout: give seconds from 0.1 to 3600, with at most 3 decimals"},
        {{"exec", "--timeout", "10.501", NULL},
         "timeout 10.501 s (asked) is above this installation's ceiling of 10.5 s"},
        {{"exec", "--memory", "205313K", NULL},
         "memory 205313 KiB (asked) is above this installation's ceiling of 205312 KiB"},
        {{"exec", "--cpus", "1.001", NULL}, "cpus 1.001 (asked) is above this installation's ceiling of 1 "},
        {{"exec", "--timeout", "3600.0001", NULL}, "give seconds from 0.1 to 3600, with at most 3 decimals"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        itest_run_t r;
        itest_pybox("print(1)\n", 9, cases[i].args, envs, &r);
        ck_assert_msg(r.status == 125, "%s: status %d", cases[i].expect, r.status);
        ck_assert_msg(itest_contains(r.err, r.err_len, cases[i].expect), "stderr lacks '%s': %.*s", cases[i].expect,
                      (int)r.err_len, r.err);
        itest_run_free(&r);
    }
    ck_assert_int_eq(itest_install_left(id, home), 0);
    itest_remove_home(home);
}
END_TEST

/* Run one file of tests/mcp with Node's test runner; its report goes to the log.
 * ITEST_NODE_PATTERN, when set, runs only the tests whose names match it. */
static void node_tests(const char *file)
{
    struct stat sb;
    ck_assert_msg(stat("tests/mcp/node_modules/@modelcontextprotocol/sdk", &sb) == 0,
                  "the MCP clients are not installed: run make check (it runs npm ci in tests/mcp)");
    char id[64];
    snprintf(id, sizeof id, "PYBOX_TEST_INSTALL_ID=%s", itest_state()->install_id);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        putenv(id);
        if (chdir("tests/mcp") < 0)
            _exit(127);
        const char *pattern = getenv("ITEST_NODE_PATTERN");
        if (pattern != NULL && pattern[0] != '\0')
            execlp("node", "node", "--test", "--test-name-pattern", pattern, file, (char *)NULL);
        else
            execlp("node", "node", "--test", file, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the client tests in tests/mcp/%s failed (status %d)",
                  file, status);
    ck_assert_int_eq(itest_install_left(itest_state()->install_id, itest_state()->dir), 0);
}

START_TEST(sdk_client)
{
    node_tests("sdk.test.mjs");
}
END_TEST

START_TEST(sessions)
{
    node_tests("session.test.mjs");
}
END_TEST

START_TEST(wire)
{
    node_tests("raw.test.mjs");
}
END_TEST

START_TEST(inspector_cli)
{
    node_tests("inspector.test.mjs");
}
END_TEST

START_TEST(http_sdk_client)
{
    node_tests("http.test.mjs");
}
END_TEST

START_TEST(http_hostile)
{
    node_tests("hostile.test.mjs");
}
END_TEST

START_TEST(http_sessions)
{
    node_tests("http-sessions.test.mjs");
}
END_TEST

START_TEST(http_behind_nginx)
{
    node_tests("proxy.test.mjs");
}
END_TEST

Suite *itest_suite_mcp(void)
{
    Suite *s = suite_create("mcp");
    itest_tcase(s, "mcp", 600, ITEST_TESTS(startup_refusals, sdk_client, sessions, wire, inspector_cli));
    itest_tcase(s, "http", 900, ITEST_TESTS(http_sdk_client, http_hostile, http_sessions, http_behind_nginx));
    itest_tcase(s, "ceilings", 120, ITEST_TESTS(ceilings_shown_exactly));
    return s;
}
