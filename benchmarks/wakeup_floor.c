/*
 * wakeup_floor.c: the floor under one lockstep batch step of a multiprocess
 * vectorized env: the parent wakes K worker processes and waits until all of
 * them have answered, with no env work, no Python and no data.
 *
 * The protocol is the one vecenv's Control uses (csrc/_core.pyx): each worker
 * sleeps on its own command word; the parent bumps the word and issues a
 * FUTEX_WAKE only when the worker announced it sleeps; each worker adds 1 to a
 * shared ready counter and the one that completes the batch wakes the parent
 * if the parent sleeps. Waiters may spin for spin_us microseconds before they
 * sleep, as vecenv does when processes do not outnumber cores.
 *
 * Built and run by benchmarks/run.py:  cc -O2 -o wakeup_floor wakeup_floor.c
 * Usage:   wakeup_floor K ITERATIONS SPIN_US
 * Output:  one JSON object on stdout with per-round-trip times in microseconds.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <signal.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 200

typedef struct {
    uint32_t seq;      /* parent adds 1 per round */
    uint32_t sleeping; /* 1 while the worker sleeps on seq */
    char pad[56];
} slot_t;

typedef struct {
    uint32_t nready;         /* workers add 1 per round */
    uint32_t parent_waiting; /* 1 while the parent sleeps on nready */
    uint32_t stop;
    char pad[52];
    slot_t slots[];
} shared_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint32_t load(uint32_t *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static void store(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static uint32_t add(uint32_t *p, uint32_t v) { return __atomic_add_fetch(p, v, __ATOMIC_SEQ_CST); }

static void futex_wait(uint32_t *addr, uint32_t expected) {
    syscall(SYS_futex, addr, FUTEX_WAIT, expected, NULL, NULL, 0);
}
static void futex_wake(uint32_t *addr) { syscall(SYS_futex, addr, FUTEX_WAKE, 1, NULL, NULL, 0); }

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Wait until *word != old (mode 0) or *word >= target (mode 1); spin first. */
static uint32_t wait_word(uint32_t *word, uint32_t *sleeping, int mode, uint32_t arg, double spin_s) {
    uint32_t v = load(word);
#define DONE(v) (mode == 0 ? (v) != arg : (v) >= arg)
    if (DONE(v)) return v;
    double start = now_s();
    unsigned long spins = 0;
    /* As vecenv polls: pause for the first turns, then yield the CPU each turn. */
    while (!DONE(v) && now_s() - start < spin_s) {
        if (spins++ < 64) {
            relax();
        } else {
            sched_yield();
        }
        v = load(word);
    }
    while (!DONE(v)) {
        store(sleeping, 1);
        v = load(word);
        if (DONE(v)) break;
        futex_wait(word, v);
        v = load(word);
    }
    store(sleeping, 0);
#undef DONE
    return v;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s K ITERATIONS SPIN_US\n", argv[0]);
        return 2;
    }
    int k = atoi(argv[1]);
    long iters = atol(argv[2]);
    double spin_s = atof(argv[3]) * 1e-6;
    if (k < 1 || iters < 1 || spin_s < 0) {
        fprintf(stderr, "K and ITERATIONS must be >= 1 and SPIN_US >= 0\n");
        return 2;
    }
    size_t size = sizeof(shared_t) + (size_t)k * sizeof(slot_t);
    shared_t *sh = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memset(sh, 0, size);
    pid_t *pids = calloc((size_t)k, sizeof(pid_t));
    double *rt = malloc(sizeof(double) * (size_t)iters);
    if (!pids || !rt) return 1;

    for (int w = 0; w < k; w++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            sh->stop = 1;
            for (int j = 0; j < w; j++) kill(pids[j], SIGKILL);
            return 1;
        }
        if (pid == 0) {
            slot_t *s = &sh->slots[w];
            uint32_t last = 0;
            for (;;) {
                last = wait_word(&s->seq, &s->sleeping, 0, last, spin_s);
                if (load(&sh->stop)) _exit(0);
                uint32_t v = add(&sh->nready, 1);
                if (v == (uint32_t)k && load(&sh->parent_waiting)) futex_wake(&sh->nready);
            }
        }
        pids[w] = pid;
    }

    for (long i = -WARMUP; i < iters; i++) {
        double t0 = now_s();
        store(&sh->nready, 0);
        for (int w = 0; w < k; w++) {
            add(&sh->slots[w].seq, 1);
            if (load(&sh->slots[w].sleeping)) futex_wake(&sh->slots[w].seq);
        }
        wait_word(&sh->nready, &sh->parent_waiting, 1, (uint32_t)k, spin_s);
        double t1 = now_s();
        if (i >= 0) rt[i] = (t1 - t0) * 1e6;
    }

    store(&sh->stop, 1);
    for (int w = 0; w < k; w++) {
        add(&sh->slots[w].seq, 1);
        futex_wake(&sh->slots[w].seq);
    }
    for (int w = 0; w < k; w++) waitpid(pids[w], NULL, 0);

    double sum = 0;
    for (long i = 0; i < iters; i++) sum += rt[i];
    qsort(rt, (size_t)iters, sizeof(double), cmp_double);
    printf("{\"workers\": %d, \"iterations\": %ld, \"spin_us\": %.3f, \"p50_us\": %.3f, "
           "\"p90_us\": %.3f, \"p99_us\": %.3f, \"mean_us\": %.3f, \"min_us\": %.3f}\n",
           k, iters, spin_s * 1e6, rt[iters / 2], rt[(iters * 9) / 10], rt[(iters * 99) / 100],
           sum / (double)iters, rt[0]);
    free(rt);
    free(pids);
    munmap(sh, size);
    return 0;
}
