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
 *          own children and reports one byte */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *state, *runner;
static int level_files, level_super, level_pooled, do_fsync;
/* The worker's end of its pooled supervisor's socket. */
static int pool_sock = -1;

static void die(const char *what) { perror(what); exit(1); }

static void sync_path(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0) die(dir);
    close(fd);
}

/* Starts the runner in its own group with its stdout on `out` (and cwd, if given). */
static pid_t spawn_runner(const char *prompt, const char *cwd, int out) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out, 1);
    if (cwd) posix_spawn_file_actions_addchdir_np(&fa, cwd);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    char *argv[] = {(char *)runner, (char *)prompt, NULL};
    pid_t pid;
    if (posix_spawn(&pid, runner, &fa, &at, argv, environ) != 0) die("posix_spawn");
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return pid;
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
    char control[CMSG_SPACE(2 * sizeof(int))];
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
        char req[4096 + 256], control[CMSG_SPACE(2 * sizeof(int))];
        struct iovec iov = {req, sizeof req - 1};
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (n <= 0) _exit(0);
        req[n] = 0;
        int fds[2];
        memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof fds);
        const char *prompt = req, *cwd = req + strlen(req) + 1;
        pid_t pid = spawn_runner(prompt, cwd, fds[0]);
        close(fds[0]);
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
    if (!mkdtemp(folder)) die("mkdtemp");

    if (level_super) supervised(prompt, folder);
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
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: design-floor spawn|files|super|pooled STATE N WORKERS FSYNC RUNNER\n");
        return 2;
    }
    level_files = strcmp(argv[1], "spawn") != 0;
    level_super = strcmp(argv[1], "super") == 0;
    level_pooled = strcmp(argv[1], "pooled") == 0;
    state = argv[2];
    int n = atoi(argv[3]), workers = atoi(argv[4]);
    do_fsync = atoi(argv[5]);
    runner = argv[6];
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
            _exit(0);
        }
    }
    int status, failed = 0;
    while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    return failed;
}
