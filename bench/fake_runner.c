/* The benchmark's runner: as cheap as a runner can be. Prints one JSON line.
 * BENCH_DELAY_MS: sleep first (slow-runner workload).
 * BENCH_LOG: append "<argv[1]> <start ns since epoch>\n" (latency workload). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    const char *log = getenv("BENCH_LOG");
    if (log && argc > 1) {
        char line[512];
        int n = snprintf(line, sizeof line, "%.400s %lld\n", argv[1],
                         (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
        int fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0600);
        if (fd >= 0) { (void)!write(fd, line, (size_t)n); close(fd); }
    }
    const char *delay = getenv("BENCH_DELAY_MS");
    if (delay) {
        long ms = atol(delay);
        struct timespec d = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&d, NULL);
    }
    fputs("{\"ok\": true}\n", stdout);
    return 0;
}
