// Growth checks: thread CPU time of a piece of work, and its ratio between two sizes (cpu_growth.h).
#include "cpu_growth.h"

#include <algorithm>
#include <ctime>
#include <limits>

static double thread_now() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double thread_cpu_seconds(const std::function<void()>& fn, int tries) {
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i < tries; i++) {
        const double t0 = thread_now();
        fn();
        best = std::min(best, thread_now() - t0);
    }
    return best;
}

double cpu_growth(const std::function<void(int)>& work, int small, int big, int tries) {
    work(small);
    const double a = thread_cpu_seconds([&] { work(small); }, tries);
    const double b = thread_cpu_seconds([&] { work(big); }, tries);
    return b / std::max(a, 1e-9);
}
