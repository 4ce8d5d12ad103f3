/* The design floor: the least work llm-judge's design does per job, in plain C, with no
 * async runtime, no JSON parser, no logging and no error handling beyond giving up.
 * It tells how much of the gap between the daemon and `xargs -P` belongs to the design
 * (the files of the queue protocol, the per-attempt supervisor) and how much to the
 * daemon's code. bench/run.py runs it beside the daemon; it asserts nothing.
 *
 *   design-floor LEVEL STATE N WORKERS FSYNC RUNNER
 *
 * STATE holds jobs/ with N jobs named j000000.json...; WORKERS processes share them
 * (job i goes to worker i % WORKERS). LEVEL:
 *   spawn  posix_spawn the runner, read its stdout, reap it (xargs with a pipe)
 *   files  spawn, plus per job what the queue protocol does on disk: read the job, create
 *          and lock the claim and write its record, a fresh 0700 runner folder, the
 *          verdict's temp file, the claim's "publishing" record, the rename, removal of
 *          the job, the claim and the folder; with FSYNC 1 the four fsyncs (temp file,
 *          claim, claims folder, verdicts folder)
 *   super  files, with the runner started by a per-attempt supervisor: a forked child
 *          subreaper that spawns the runner, reads its output, reaps it, reads its own
 *          children (the leftover sweep) and reports back through a pipe
 *   pooled files, with the runner started by the worker's one long-lived supervisor (as
 *          the daemon's pooled supervisors do): per job, the worker sends it the runner's
 *          stdout pipe and a report pipe over a Unix socket (SCM_RIGHTS) and reads the
 *          runner's output itself; the supervisor spawns the runner, reaps it, reads its
 *          own children and reports one byte
 *   spec   pooled, plus the rest of what the contract (docs/reference.md) asks of every job and the levels above
 *          leave out: the four judge.log lines (job claimed, runner start and end, job
 *          finished; UTC timestamps, appended to judge.log and copied to stderr), the
 *          runner's stdin on /dev/null and its stderr read through a second pipe, its
 *          environment tagged with the attempt, and runner health read (health.json)
 *          before the attempt. Still no JSON parser, no timeouts, no error handling:
 *          the least any implementation of the contract does per job
 *
 * With DESIGN_FLOOR_RUSAGE=FILE, each worker and pooled supervisor appends
 * "worker|supervisor USER_US SYSTEM_US" (its own getrusage) to FILE as it ends
 * (bench/thread_cpu.py). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char *state, *runner;
static int level_files, level_super, level_pooled, level_spec, do_fsync;
/* judge.log, opened once (spec level). */
static int log_fd = -1;
/* The worker's end of its pooled supervisor's socket. */
static int pool_sock = -1;

static void die(const char *what) { perror(what); exit(1); }

/* Appends this process's own CPU time to $DESIGN_FLOOR_RUSAGE, if set. */
static void report_rusage(const char *kind) {
    const char *path = getenv("DESIGN_FLOOR_RUSAGE");
    struct rusage ru;
    if (!path || getrusage(RUSAGE_SELF, &ru) != 0) return;
    char line[128];
    int n = snprintf(line, sizeof line, "%s %lld %lld\n", kind,
                     (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
                     (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) { (void)!write(fd, line, (size_t)n); close(fd); }
}

static void sync_path(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0) die(dir);
    close(fd);
}

/* Starts the runner in its own group with `io[i]` on descriptor `first + i` (i < count),
 * in `cwd` if given, with environment `envp`. */
static pid_t spawn_io(const char *prompt, const char *cwd, const int *io, int first, int count,
                      char **envp) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    for (int i = 0; i < count; i++) posix_spawn_file_actions_adddup2(&fa, io[i], first + i);
    if (cwd) posix_spawn_file_actions_addchdir_np(&fa, cwd);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    char *argv[] = {(char *)runner, (char *)prompt, NULL};
    pid_t pid;
    if (posix_spawn(&pid, runner, &fa, &at, argv, envp) != 0) die("posix_spawn");
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return pid;
}

/* Starts the runner in its own group with its stdout on `out` (and cwd, if given). */
static pid_t spawn_runner(const char *prompt, const char *cwd, int out) {
    return spawn_io(prompt, cwd, &out, 1, 1, environ);
}

/* The spec level's runner: stdin, stdout and stderr given, the environment tagged. */
static pid_t spawn_tagged(const char *prompt, const char *cwd, const int io[3], const char *tag) {
    static char **envp;
    static size_t n_env;
    static char tag_var[128];
    if (!envp) {
        while (environ[n_env]) n_env++;
        /* As the daemon: the service manager's variables dropped, the child marker and
         * the attempt's tag added. */
        envp = calloc(n_env + 3, sizeof *envp);
        if (!envp) die("calloc");
        size_t kept = 0;
        for (size_t i = 0; i < n_env; i++) {
            const char *v = environ[i];
            if (strncmp(v, "NOTIFY_SOCKET=", 14) && strncmp(v, "LISTEN_", 7) && strncmp(v, "WATCHDOG_", 9))
                envp[kept++] = environ[i];
        }
        envp[kept++] = (char *)"CATSTACK_LLM_JUDGE_CHILD=1";
        envp[kept] = tag_var;
    }
    snprintf(tag_var, sizeof tag_var, "LLM_JUDGE_TAG=%s", tag);
    return spawn_io(prompt, cwd, io, 0, 3, envp);
}

/* One judge.log line: UTC timestamp, appended whole, and copied to stderr without it. */
static void log_line(const char *event, const char *name) {
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    char line[512];
    int stamp = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    int n = stamp + snprintf(line + stamp, sizeof line - (size_t)stamp,
                             ".%06ldZ  INFO %s id=%s runner=fake\n", now.tv_nsec / 1000, event, name);
    if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
    /* stderr gets the line from the space before INFO, as the daemon's without_time. */
    if (write(log_fd, line, (size_t)n) != n) die("judge.log");
    (void)!write(2, line + stamp + 9, (size_t)(n - stamp - 9));
}

/* Runner health before an attempt: read health.json when there is one. */
static void read_health(void) {
    char path[4096], buf[4096];
    snprintf(path, sizeof path, "%s/health.json", state);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) { (void)!read(fd, buf, sizeof buf); close(fd); }
}

/* Starts the runner with its stdout on a pipe, reads it to the end, reaps it. */
static void run_runner(const char *prompt, const char *cwd) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) die("pipe");
    pid_t pid = spawn_runner(prompt, cwd, out[1]);
    close(out[1]);
    char buf[4096];
    while (read(out[0], buf, sizeof buf) > 0) {}
    close(out[0]);
    waitpid(pid, NULL, 0);
}

/* The per-attempt supervisor: a subreaper child that runs the runner, sweeps its own
 * children and reports one byte. */
static void supervised(const char *prompt, const char *cwd) {
    int rep[2];
    if (pipe2(rep, O_CLOEXEC) != 0) die("pipe");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        prctl(PR_SET_CHILD_SUBREAPER, 1);
        run_runner(prompt, cwd);
        char kids[256];
        int fd = open("/proc/thread-self/children", O_RDONLY);
        if (fd >= 0) { (void)!read(fd, kids, sizeof kids); close(fd); }
        (void)!write(rep[1], "k", 1);
        _exit(0);
    }
    close(rep[1]);
    char c;
    (void)!read(rep[0], &c, 1);
    close(rep[0]);
    waitpid(pid, NULL, 0);
}

/* Sends `len` bytes with descriptors `fds` attached. */
static void send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds) {
    char control[CMSG_SPACE(4 * sizeof(int))];
    memset(control, 0, sizeof control);
    struct iovec iov = {(void *)buf, len};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    if (sendmsg(sock, &msg, 0) != (ssize_t)len) die("sendmsg");
}

/* The pooled supervisor's life: per request (prompt and cwd, the runner's stdout and a
 * report pipe), spawn the runner, reap it, read its own children, report one byte. */
static void serve_pooled(int sock) {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    for (;;) {
        char req[4096 + 256], control[CMSG_SPACE(4 * sizeof(int))];
        struct iovec iov = {req, sizeof req - 1};
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (n <= 0) { report_rusage("supervisor"); _exit(0); }
        req[n] = 0;
        int fds[4];
        int nfds = level_spec ? 4 : 2;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        if (!c || (msg.msg_flags & MSG_CTRUNC) || c->cmsg_len != CMSG_LEN((size_t)nfds * sizeof(int)))
            _exit(1);
        memcpy(fds, CMSG_DATA(c), (size_t)nfds * sizeof(int));
        const char *prompt = req, *cwd = req + strlen(req) + 1;
        pid_t pid;
        if (level_spec) {
            pid = spawn_tagged(prompt, cwd, fds, cwd + strlen(cwd) + 1);
            for (int i = 0; i < 3; i++) close(fds[i]);
            fds[1] = fds[3];
        } else {
            pid = spawn_runner(prompt, cwd, fds[0]);
            close(fds[0]);
        }
        waitpid(pid, NULL, 0);
        char kids[256];
        int fd = open("/proc/thread-self/children", O_RDONLY);
        if (fd >= 0) { (void)!read(fd, kids, sizeof kids); close(fd); }
        (void)!write(fds[1], "k", 1);
        close(fds[1]);
    }
}

/* One attempt through the worker's pooled supervisor. */
static void pooled(const char *prompt, const char *cwd) {
    int out[2], rep[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) die("pipe");
    char req[4096 + 256];
    size_t lp = strlen(prompt) + 1, lc = strlen(cwd) + 1;
    memcpy(req, prompt, lp);
    memcpy(req + lp, cwd, lc);
    int fds[2] = {out[1], rep[1]};
    send_fds(pool_sock, req, lp + lc, fds, 2);
    close(out[1]);
    close(rep[1]);
    char buf[4096];
    while (read(out[0], buf, sizeof buf) > 0) {}
    close(out[0]);
    (void)!read(rep[0], buf, 1);
    close(rep[0]);
}

/* One attempt at the spec level: /dev/null, stdout and stderr pipes, the tag, both
 * pipes read to their end together, then the supervisor's report. */
static void pooled_spec(const char *prompt, const char *cwd, const char *name) {
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC), out[2], err[2], rep[2];
    if (in < 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0)
        die("pipe");
    char req[4096 + 256];
    size_t lp = strlen(prompt) + 1, lc = strlen(cwd) + 1, lt = strlen(name) + 1;
    memcpy(req, prompt, lp);
    memcpy(req + lp, cwd, lc);
    memcpy(req + lp + lc, name, lt);
    int fds[4] = {in, out[1], err[1], rep[1]};
    log_line("runner start", name);
    send_fds(pool_sock, req, lp + lc + lt, fds, 4);
    for (int i = 0; i < 4; i++) close(fds[i]);
    struct pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    char buf[4096];
    for (int open_fds = 2; open_fds > 0;) {
        if (poll(p, 2, 60000) <= 0) die("poll");
        for (int i = 0; i < 2; i++) {
            if (p[i].revents && read(p[i].fd, buf, sizeof buf) <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
                open_fds--;
            }
        }
    }
    (void)!read(rep[0], buf, 1);
    close(rep[0]);
    log_line("runner end", name);
}

static void write_record(int fd, const char *state_word, const char *name) {
    char rec[512];
    int n = snprintf(rec, sizeof rec,
                     "{\"state\":\"%s\",\"interruptions\":0,\"owner_pid\":%d,\"tag\":"
                     "\"0123456789abcdef0123456789abcdef\",\"job\":{\"dev\":1,\"ino\":2},"
                     "\"name\":\"%s\"}",
                     state_word, getpid(), name);
    if (pwrite(fd, rec, (size_t)n, 0) != n) die("claim record");
}

static void one_job(int i) {
    char name[64], job[4096], claim[4096], folder[4096], temp[4096], verdict[4096];
    char claims[4096], verdicts[4096], prompt[256];
    snprintf(name, sizeof name, "j%06d", i);
    snprintf(job, sizeof job, "%s/jobs/%s.json", state, name);
    snprintf(prompt, sizeof prompt, "j%d", i);
    if (!level_files) {
        run_runner(prompt, NULL);
        unlink(job);
        return;
    }
    snprintf(claims, sizeof claims, "%s/claims", state);
    snprintf(verdicts, sizeof verdicts, "%s/verdicts", state);
    snprintf(claim, sizeof claim, "%s/%s.json", claims, name);
    snprintf(folder, sizeof folder, "%s/tmp/run-XXXXXX", state);
    snprintf(temp, sizeof temp, "%s/.%s.json.tmp", verdicts, name);
    snprintf(verdict, sizeof verdict, "%s/%s.json", verdicts, name);

    int cfd = open(claim, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (cfd < 0 || flock(cfd, LOCK_EX | LOCK_NB) != 0) die(claim);
    char body[4096];
    int jfd = open(job, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (jfd < 0) die(job);
    (void)!read(jfd, body, sizeof body);
    close(jfd);
    write_record(cfd, "running", name);
    if (level_spec) log_line("job claimed", name);
    if (!mkdtemp(folder)) die("mkdtemp");

    if (level_spec) {
        read_health();
        pooled_spec(prompt, folder, name);
    } else if (level_super) supervised(prompt, folder);
    else if (level_pooled) pooled(prompt, folder);
    else run_runner(prompt, folder);

    int tfd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (tfd < 0) die(temp);
    const char *v = "{\"id\":\"x\",\"transcript\":\"\",\"answer\":{\"ok\":true},\"runner\":\"fake\"}\n";
    if (write(tfd, v, strlen(v)) < 0) die(temp);
    if (do_fsync && fsync(tfd) != 0) die(temp);
    close(tfd);
    write_record(cfd, "publishing", name);
    if (do_fsync) {
        if (fsync(cfd) != 0) die(claim);
        sync_path(claims);
    }
    if (rename(temp, verdict) != 0) die(verdict);
    if (do_fsync) sync_path(verdicts);
    unlink(job);
    rmdir(folder);
    unlink(claim);
    close(cfd);
    if (level_spec) log_line("job finished", name);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: design-floor spawn|files|super|pooled|spec STATE N WORKERS FSYNC RUNNER\n");
        return 2;
    }
    level_files = strcmp(argv[1], "spawn") != 0;
    level_super = strcmp(argv[1], "super") == 0;
    level_spec = strcmp(argv[1], "spec") == 0;
    level_pooled = level_spec || strcmp(argv[1], "pooled") == 0;
    state = argv[2];
    int n = atoi(argv[3]), workers = atoi(argv[4]);
    do_fsync = atoi(argv[5]);
    runner = argv[6];
    if (level_spec) {
        char path[4096];
        snprintf(path, sizeof path, "%s/judge.log", state);
        log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (log_fd < 0) die(path);
    }
    for (int w = 0; w < workers; w++) {
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) {
            if (level_pooled) {
                int sv[2];
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) die("socketpair");
                pid_t sup = fork();
                if (sup < 0) die("fork");
                if (sup == 0) { close(sv[0]); serve_pooled(sv[1]); }
                close(sv[1]);
                pool_sock = sv[0];
            }
            for (int i = w; i < n; i += workers) one_job(i);
            if (level_pooled) { close(pool_sock); wait(NULL); }
            report_rusage("worker");
            _exit(0);
        }
    }
    int status, failed = 0;
    while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    return failed;
}
