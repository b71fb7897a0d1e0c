/* SPDX-License-Identifier: MIT */
/* The program gets nothing of the host: no host files, no PyBox environment, no network,
 * no way into the box's init. */
#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../pybox/image/image.h"
#include "../pybox/policy.h"
#include "../pybox/run.h"
#include "../pybox/uid.h"
#include "../pybox/util.h"
#include "itest.h"
#include "suites.h"

/* A non-loopback IPv4 address of this host, if it has one. */
static int host_ipv4(char *out, size_t len)
{
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) < 0)
        return -1;
    int rc = -1;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        struct sockaddr_in *a = (struct sockaddr_in *)i->ifa_addr;
        if ((ntohl(a->sin_addr.s_addr) >> 24) == 127)
            continue;
        inet_ntop(AF_INET, &a->sin_addr, out, (socklen_t)len);
        rc = 0;
        break;
    }
    freeifaddrs(ifa);
    return rc;
}

START_TEST(nothing_of_the_host)
{
    /* Canaries the program must not see: a host file, an environment variable of
     * PyBox's, the host's name, and a TCP listener on the host. */
    char canary[33], path[128];
    pybox_random_hex(16, canary, NULL);
    snprintf(path, sizeof path, "/tmp/pybox-itest-%s", canary);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, canary, 32), 32);
    close(fd);
    char hostname[256] = "";
    gethostname(hostname, sizeof hostname - 1);

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(ls, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    ck_assert_int_eq(bind(ls, (struct sockaddr *)&addr, sizeof addr), 0);
    ck_assert_int_eq(listen(ls, 8), 0);
    socklen_t alen = sizeof addr;
    getsockname(ls, (struct sockaddr *)&addr, &alen);
    int port = ntohs(addr.sin_port);
    char ip[64] = "127.0.0.1";
    host_ipv4(ip, sizeof ip);

    char prog[4096];
    snprintf(prog, sizeof prog,
             "import os, socket\n"
             "try:\n    print('file', open('%s').read())\nexcept OSError as e:\n    print('file-error', e.errno)\n"
             "print('hostname', open('/etc/hostname').read().strip(), socket.gethostname())\n"
             "print('env', sorted(os.environ.items()))\n"
             "for host in ('%s', '127.0.0.1', '1.1.1.1'):\n"
             "    try:\n        socket.create_connection((host, %d), timeout=2)\n        print('connected', host)\n"
             "    except OSError as e:\n        print('net-error', host, e.errno)\n"
             "try:\n    socket.getaddrinfo('debian.org', 80)\n    print('dns resolved')\n"
             "except OSError as e:\n    print('dns-error')\n"
             "print('ifaces', sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))\n"
             "for f in ('/proc/1/environ', '/proc/1/mem', '/var/run/docker.sock'):\n"
             "    try:\n        open(f, 'rb').read(1)\n        print('read', f)\n"
             "    except OSError as e:\n        print('denied', f, e.errno)\n",
             path, ip, port);
    char envvar[96];
    snprintf(envvar, sizeof envvar, "PYBOX_ITEST_CANARY=%s", canary);
    const char *env[] = {envvar, NULL};
    const char *args[] = {"exec", "--json", "--timeout", "10", NULL};
    itest_run_t r;
    itest_pybox(prog, strlen(prog), args, env, &r);
    ck_assert_ptr_nonnull(r.receipt);
    ck_assert_int_eq(r.status, 0);
    const char *out = itest_str(r.receipt, "said.stdout.text");
    ck_assert_ptr_nonnull(out);
    ck_assert_msg(!strstr(out, canary), "a canary reached the box: %s", out);
    ck_assert_ptr_nonnull(strstr(out, "file-error 2")); /* ENOENT: not the host's /tmp */
    ck_assert_ptr_nonnull(strstr(out, "hostname pybox pybox"));
    if (strcmp(hostname, "pybox") != 0)
        ck_assert_msg(!strstr(out, hostname), "the host's name reached the box");
    ck_assert_ptr_null(strstr(out, "connected"));
    ck_assert_ptr_nonnull(strstr(out, "dns-error"));
    ck_assert_ptr_nonnull(strstr(out, "ifaces ['lo']"));
    ck_assert_ptr_nonnull(strstr(out, "denied /proc/1/environ 13"));
    ck_assert_ptr_nonnull(strstr(out, "denied /proc/1/mem 13"));
    ck_assert_ptr_nonnull(strstr(out, "denied /var/run/docker.sock 2"));
    ck_assert_ptr_nonnull(strstr(out, "env [('HOME', '/tmp'), ('HOSTNAME', 'pybox'), ('LANG', 'C.UTF-8'), ('PATH', "));
    /* Nothing ever reached the host's listener. */
    int c = accept(ls, NULL, NULL);
    ck_assert_int_lt(c, 0);
    close(ls);
    unlink(path);
    itest_run_free(&r);
}
END_TEST

START_TEST(read_only_root_and_no_privileges)
{
    itest_run_t r;
    itest_exec("import os\n"
               "for p in ('/etc/x', '/usr/x', '/x'):\n"
               "    try:\n        open(p, 'w')\n        print('wrote', p)\n"
               "    except OSError as e:\n        print('ro', p, e.errno)\n"
               "open('/tmp/scratch', 'w').write('ok')\nprint('tmp', open('/tmp/scratch').read())\n"
               "print('uid', os.getuid(), os.geteuid(), os.getgid())\n"
               "st = dict(l.split(':\\t') for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
               "print('caps', st['CapEff'], st['CapBnd'], 'nnp', st['NoNewPrivs'], 'seccomp', st['Seccomp'])\n",
               NULL, &r);
    ck_assert_int_eq(r.status, 0);
    const char *out = itest_str(r.receipt, "said.stdout.text");
    ck_assert_ptr_null(strstr(out, "wrote"));
    ck_assert_ptr_nonnull(strstr(out, "ro /x 30")); /* EROFS */
    ck_assert_ptr_nonnull(strstr(out, "tmp ok"));
    /* The program runs as the run's own user, the one the receipt names. */
    char want[64];
    double uid = itest_num(r.receipt, "asked.policy.program_uid");
    /* the machine's range (root), or the user's own (rootless): uid.h */
    pybox_uid_range_t range;
    char leases[PATH_MAX];
    pybox_error_t rerr = {0};
    ck_assert_msg(pybox_uid_machine(&range, leases, sizeof leases, &rerr) == 0, "%s", rerr.msg);
    ck_assert_msg(uid >= range.base && uid < (double)range.base + range.count, "uid %.0f not in %u+%u", uid,
                  (unsigned)range.base, range.count);
    snprintf(want, sizeof want, "uid %.0f %.0f %.0f", uid, uid, uid);
    ck_assert_msg(strstr(out, want) != NULL, "%s not in %s", want, out);
    /* No capability at all; the bounding set keeps what the box's init was given, which
     * no-new-privileges makes unreachable. */
    ck_assert_ptr_nonnull(strstr(out, "caps 0000000000000000 00000000000000e0 nnp 1 seccomp 2"));
    itest_run_free(&r);
}
END_TEST

/* The program holds its three standard streams and nothing else of the init's: no
 * second copy of a pipe, no descriptor of the box's making. */
START_TEST(only_the_standard_streams)
{
    itest_run_t r;
    itest_exec("import os\n"
               "names = os.listdir('/proc/self/fd')\n"
               "print(sorted(int(n) for n in names if os.path.exists('/proc/self/fd/' + n)))\n",
               NULL, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(itest_str(r.receipt, "said.stdout.text"), "[0, 1, 2]\n");
    itest_run_free(&r);
}
END_TEST

START_TEST(program_cannot_reach_the_init)
{
    /* The box's PID 1 runs as another user: the program can neither signal it, nor
     * renice, pin or rlimit it, nor read its memory or environment. */
    itest_run_t r;
    itest_exec("import os, resource, signal\n"
               "tries = [('kill', lambda: os.kill(1, signal.SIGUSR2)), ('rt', lambda: os.kill(1, 40)),\n"
               "         ('nice', lambda: os.setpriority(os.PRIO_PROCESS, 1, 19)),\n"
               "         ('pin', lambda: os.sched_setaffinity(1, {0})),\n"
               "         ('rlimit', lambda: resource.prlimit(1, resource.RLIMIT_CPU, (1, 1))),\n"
               "         ('environ', lambda: open('/proc/1/environ', 'rb').read()),\n"
               "         ('mem', lambda: open('/proc/1/mem', 'rb').read(1))]\n"
               "for name, f in tries:\n"
               "    try:\n        f()\n        print(name, 'DONE')\n"
               "    except OSError as e:\n        print(name, 'denied', e.errno)\n"
               "print('uid of 1:', open('/proc/1/status').read().split('Uid:')[1].split()[0])\n"
               "import socket\nprint('localhost', sorted({a[4][0] for a in socket.getaddrinfo('localhost', 80)}))\n",
               NULL, &r);
    ck_assert_int_eq(r.status, 0);
    const char *out = itest_str(r.receipt, "said.stdout.text");
    ck_assert_msg(strstr(out, "DONE") == NULL, "the program reached the init: %s", out);
    ck_assert_ptr_nonnull(strstr(out, "kill denied 1"));
    ck_assert_ptr_nonnull(strstr(out, "rt denied 1"));
    ck_assert_ptr_nonnull(strstr(out, "nice denied"));
    ck_assert_ptr_nonnull(strstr(out, "pin denied"));
    ck_assert_ptr_nonnull(strstr(out, "rlimit denied"));
    ck_assert_ptr_nonnull(strstr(out, "environ denied 13"));
    ck_assert_ptr_nonnull(strstr(out, "mem denied 13"));
    ck_assert_ptr_nonnull(strstr(out, "uid of 1: 0"));
    ck_assert_ptr_nonnull(strstr(out, "localhost ['127.0.0.1', '::1']"));
    itest_run_free(&r);
}
END_TEST

/* ---- every claim both ways: with the protection, and with only it removed ---- */

static void relax_bind(struct pybox_policy *p, void *arg)
{
    p->relax_bind = arg;
}

static void relax_env(struct pybox_policy *p, void *arg)
{
    p->relax_env = arg;
}

static void relax_netns(struct pybox_policy *p, void *arg)
{
    p->relax_netns = arg;
}

static void relax_unmask(struct pybox_policy *p, void *arg)
{
    p->relax_unmask = arg;
}

/* The host's pressure stall files (/proc/pressure/cpu, io, memory) are the whole host's
 * and writable by any user: a write arms a trigger the kernel then polls for. A box's
 * program (its own user, no capability) can neither open them for writing nor see them;
 * with only that mask removed it arms a trigger, while every other mask (the timer list
 * here) stays (or, in an engine's box on a host with AppArmor, the engine's own profile
 * refuses the open). A host whose kernel has no pressure files has nothing to protect. */
START_TEST(pressure_files_both_ways)
{
    const char *prog = "import errno, os\n"
                       "for name in ('cpu', 'io', 'memory'):\n"
                       "    p = '/proc/pressure/' + name\n"
                       "    w = os.access(p, os.W_OK)\n"
                       "    try:\n"
                       "        fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)\n"
                       "    except OSError as e:\n"
                       "        print(name, 'open', errno.errorcode.get(e.errno, e.errno), 'writable', w)\n"
                       "        continue\n"
                       "    try:\n"
                       "        print(name, 'TRIGGER', os.write(fd, b'some 500000 2000000\\0'), 'writable', w)\n"
                       "    except OSError as e:\n"
                       "        print(name, 'write', errno.errorcode.get(e.errno, e.errno), 'writable', w)\n"
                       "    os.close(fd)\n"
                       "print('listed', os.path.isdir('/proc/pressure') and sorted(os.listdir('/proc/pressure')))\n"
                       "print('timer_list', len(open('/proc/timer_list').read()))\n"
                       "try:\n"
                       "    print('confined by', open('/proc/self/attr/current').read().strip())\n"
                       "except OSError:\n"
                       "    print('confined by', 'nothing')\n";
    const char *masked = "cpu open ENOENT writable False\nio open ENOENT writable False\n"
                         "memory open ENOENT writable False\nlisted []\ntimer_list 0\nconfined by ";
    pybox_run_result_t res;
    ck_assert_int_eq(itest_lib_run(prog, NULL, NULL, &res), 0);
    ck_assert_msg(strncmp(itest_said(&res), masked, strlen(masked)) == 0,
                  "the box reached the host's pressure files: %s", itest_said(&res));
    pybox_run_result_free(&res);
    if (access("/proc/pressure/cpu", W_OK) != 0)
        return; /* no pressure files on this host: no escape to see */
    /* Only the protection removed: the test sees the escape, and nothing else changed. */
    char pressure[] = "/proc/pressure";
    ck_assert_int_eq(itest_lib_run(prog, relax_unmask, pressure, &res), 0);
    ck_assert(res.verified);
    const char *said = itest_said(&res);
    /* An engine that confines its boxes with its AppArmor profile (Docker's docker-default,
     * on a host with AppArmor) denies writes under /proc itself: there, the open is refused
     * by that profile, which the box's record names; elsewhere the trigger is armed. */
    if (strstr(said, "confined by docker-default") != NULL)
        ck_assert_msg(strstr(said, "cpu open EACCES writable True\n") != NULL,
                      "the relaxed box under docker-default: %s", said);
    else
        ck_assert_msg(strstr(said, "cpu TRIGGER 20 writable True\n") != NULL, "the relaxed box armed no trigger: %s",
                      said);
    ck_assert_msg(strstr(said, "timer_list 0\n") != NULL, "another mask went with it: %s", said);
    char relaxed[256];
    pybox_policy_relaxed(&res.policy, relaxed, sizeof relaxed);
    ck_assert_str_eq(relaxed, "unmasked /proc/pressure");
    pybox_run_result_free(&res);
}
END_TEST

START_TEST(host_files_both_ways)
{
    char dir[64] = "/tmp/pybox-hostdir-XXXXXX", canary[33], path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(chmod(dir, 0755), 0); /* readable by anyone: only the mount decides */
    pybox_random_hex(16, canary, NULL);
    snprintf(path, sizeof path, "%s/canary", dir);
    FILE *f = fopen(path, "we");
    fputs(canary, f);
    fclose(f);
    ck_assert_int_eq(chmod(path, 0644), 0);
    char prog[512];
    snprintf(prog, sizeof prog,
             "for p in ('/host/canary', '%s'):\n    try:\n        print(open(p).read())\n"
             "    except OSError as e:\n        print('no', e.errno)\n",
             path);
    pybox_run_result_t res;
    ck_assert_int_eq(itest_lib_run(prog, NULL, NULL, &res), 0);
    ck_assert_msg(strstr(itest_said(&res), canary) == NULL, "a host file reached the box");
    ck_assert_str_eq(itest_said(&res), "no 2\nno 2\n");
    pybox_run_result_free(&res);
    /* Only the protection removed (a host folder mounted): the test sees the escape. */
    ck_assert_int_eq(itest_lib_run(prog, relax_bind, dir, &res), 0);
    ck_assert_msg(strstr(itest_said(&res), canary) != NULL, "the relaxed box did not see the host file: %s",
                  itest_said(&res));
    ck_assert(res.verified);
    pybox_run_result_free(&res);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(environment_both_ways)
{
    char canary[33], entry[64];
    pybox_random_hex(16, canary, NULL);
    snprintf(entry, sizeof entry, "PYBOX_ITEST_CANARY=%s", canary);
    setenv("PYBOX_ITEST_CANARY", canary, 1); /* in PyBox's own environment */
    const char *prog = "import os\nprint(sorted(os.environ.items()))\n";
    pybox_run_result_t res;
    ck_assert_int_eq(itest_lib_run(prog, NULL, NULL, &res), 0);
    ck_assert_msg(strstr(itest_said(&res), canary) == NULL, "PyBox's environment reached the box");
    pybox_run_result_free(&res);
    ck_assert_int_eq(itest_lib_run(prog, relax_env, entry, &res), 0);
    ck_assert_msg(strstr(itest_said(&res), canary) != NULL, "the relaxed box did not see the variable");
    pybox_run_result_free(&res);
    unsetenv("PYBOX_ITEST_CANARY");
}
END_TEST

/* The native backend's listener: a process of the test in a network namespace of its
 * own, loopback up, answering every connection with the canary until killed. Returns its
 * pid once it listens (a byte on the pipe says so). */
static pid_t native_listener(const char *canary)
{
    int ready[2];
    ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(ready[0]);
        /* Rootless, a box may only share PyBox's own network namespace: the listener
         * stays in it (the box's own, without the relaxation, is still another). */
        if (geteuid() == 0 && unshare(CLONE_NEWNET) < 0)
            _exit(10);
        int sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr;
        memset(&ifr, 0, sizeof ifr);
        snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
        ifr.ifr_flags = IFF_UP | IFF_RUNNING;
        if (sk < 0 || (geteuid() == 0 && ioctl(sk, SIOCSIFFLAGS, &ifr) < 0)) /* the host's is up */
            _exit(11);
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(7777)};
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int one = 1;
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ls < 0 || bind(ls, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(ls, 8) < 0)
            _exit(12);
        if (write(ready[1], "r", 1) != 1)
            _exit(13);
        for (;;) {
            int c = accept(ls, NULL, NULL);
            if (c < 0)
                continue;
            if (write(c, canary, strlen(canary)) < 0) {
                /* the client went away: nothing to do */
            }
            close(c);
        }
    }
    close(ready[1]);
    char b;
    ck_assert_msg(read(ready[0], &b, 1) == 1, "the listener did not start");
    close(ready[0]);
    return pid;
}

START_TEST(network_both_ways)
{
    const char *prog = "import socket, time\n"
                       "for i in range(20):\n"
                       "    try:\n        c = socket.create_connection(('127.0.0.1', 7777), timeout=1)\n"
                       "        print('got', c.recv(64).decode())\n        break\n"
                       "    except OSError as e:\n        err = e.errno\n        time.sleep(0.05)\n"
                       "else:\n    print('no', err)\n";
    if (itest_native()) {
        char canary[33], netns[32], want[64];
        pybox_random_hex(16, canary, NULL);
        pid_t l = native_listener(canary);
        pybox_run_result_t res;
        ck_assert_int_eq(itest_lib_run(prog, NULL, NULL, &res), 0);
        ck_assert_str_eq(itest_said(&res), "no 111\n"); /* ECONNREFUSED: its own empty loopback */
        pybox_run_result_free(&res);
        /* Only the protection removed (the listener's network namespace joined). */
        snprintf(netns, sizeof netns, "pid:%d", (int)l);
        ck_assert_msg(itest_lib_run(prog, relax_netns, netns, &res) == 0, "%s", res.error.msg);
        snprintf(want, sizeof want, "got %s\n", canary);
        ck_assert_str_eq(itest_said(&res), want);
        pybox_run_result_free(&res);
        kill(l, SIGKILL);
        waitpid(l, NULL, 0);
        return;
    }
    /* A listener on the loopback of a network namespace of its own (no network at all:
     * NetworkMode none), holding a canary. */
    pybox_engine_t *e = itest_engine();
    pybox_pin_t pin;
    pybox_error_t err = {0};
    ck_assert(itest_resolve("stdlib", &pin, &err) == 0);
    char canary[33], run[33], body[2048];
    pybox_random_hex(16, canary, NULL);
    pybox_random_hex(16, run, NULL);
    snprintf(body, sizeof body,
             "{\"Image\":\"%s\",\"User\":\"65534\",\"Entrypoint\":[\"/usr/bin/python3\",\"-c\","
             "\"import socket\\ns = socket.socket()\\ns.bind(('127.0.0.1', 7777))\\ns.listen()\\n"
             "while True:\\n    c, _ = s.accept()\\n    c.sendall(b'%s')\\n    c.close()\\n\"],"
             "\"Labels\":{\"pybox.install\":\"%s\",\"pybox.run\":\"%s\",\"pybox.expires\":\"1\"},"
             "\"HostConfig\":{\"NetworkMode\":\"none\",\"ReadonlyRootfs\":true,\"CapDrop\":[\"ALL\"]}}",
             pin.id, canary, itest_state()->install_id, run);
    cJSON *b = cJSON_Parse(body);
    ck_assert_ptr_nonnull(b);
    long status = 0;
    cJSON *reply = NULL;
    ck_assert(pybox_engine_call(e, "POST", "/containers/create", b, &status, &reply, &err) == 0);
    cJSON_Delete(b);
    ck_assert_int_eq(status, 201);
    char id[80];
    snprintf(id, sizeof id, "%s", itest_str(reply, "Id"));
    cJSON_Delete(reply);
    char path[200];
    snprintf(path, sizeof path, "/containers/%s/start", id);
    ck_assert(pybox_engine_call(e, "POST", path, NULL, &status, &reply, &err) == 0);
    ck_assert_int_eq(status, 204);
    cJSON_Delete(reply);

    pybox_run_result_t res;
    ck_assert_int_eq(itest_lib_run(prog, NULL, NULL, &res), 0);
    ck_assert_str_eq(itest_said(&res), "no 111\n"); /* ECONNREFUSED: its own empty loopback */
    pybox_run_result_free(&res);
    /* Only the protection removed (the listener's network namespace joined). */
    ck_assert_msg(itest_lib_run(prog, relax_netns, id, &res) == 0, "%s", res.error.msg);
    char want[64];
    snprintf(want, sizeof want, "got %s\n", canary);
    ck_assert_str_eq(itest_said(&res), want);
    pybox_run_result_free(&res);

    ck_assert_int_eq(itest_remove_run(e, run), 1);
    pybox_engine_free(e);
}
END_TEST

Suite *itest_suite_isolation(void)
{
    Suite *s = suite_create("isolation");
    itest_tcase(s, "host", 60,
                ITEST_TESTS(nothing_of_the_host, read_only_root_and_no_privileges, only_the_standard_streams,
                            program_cannot_reach_the_init, host_files_both_ways, environment_both_ways,
                            pressure_files_both_ways, network_both_ways));
    return s;
}
