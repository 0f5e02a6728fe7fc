/* upstream: the paced, stamped SSE upstream of bench/record_timing.py (C99 for Linux:
 * epoll and a timerfd, no dependencies), compiled and run by bench/_loadgen.py.
 *
 *   gcc -O2 -std=c99 -Wall -Wextra -Werror -o upstream bench/upstream.c
 *   upstream EVENTS GAP_MS [PAD]
 *
 * Why C: the bench measures recorders sharing two cores with their load. The Python
 * upstream (tests/support/reliability.py, a thread per connection) took a quarter to
 * half a core at 200 streams of 50 events/s, CPU the recorders under test did not get,
 * as loadgen.c's header says of the Python client.
 *
 * It listens on 127.0.0.1 (a port the kernel picks), prints "upstream on 127.0.0.1:PORT"
 * and serves until killed. Every HTTP/1.1 request (its head, then Content-Length bytes
 * of body) is answered with a chunked text/event-stream of EVENTS events GAP_MS apart,
 * on absolute deadlines from the first (written at once), one chunk per event:
 *   data: {"c": "ID", "i": I, "t": T, "pad": "xx..."}\n\n
 * ID is ?c=ID of the request's path ("-" without one), I the event's index, T the
 * CLOCK_MONOTONIC time in ns (Python's time.perf_counter_ns on Linux) read right before
 * the event is written, PAD that many x's (60 unless given): the events of the Python
 * upstream. Then the 0-size chunk; the connection stays open for the next request.
 * One timerfd wakes the loop at the earliest deadline of all streams (ns resolution, no
 * spinning); every stream due then is written in that wake.
 * Exit status 2 for bad arguments, 1 if it cannot listen.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define HEAD "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n" \
             "transfer-encoding: chunked\r\n\r\n"
#define LISTENER UINT32_MAX
#define TIMER (UINT32_MAX - 1)

struct conn {
    int fd;                  /* -1: a free slot */
    char in[8192];           /* what the client sent and we have not answered yet */
    size_t in_len;
    int answering;           /* a response under way: event `next` due at `due` */
    long next;
    int64_t due;
    char id[64];
    char *out;               /* bytes the socket did not take yet, written in order */
    size_t out_len, out_cap;
};

static struct conn *C;
static size_t n_conns, cap;  /* slots in use (some free again), slots allocated */
static long events;
static int64_t gap_ns;
static char pad[4096];
static int ep;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void drop(struct conn *c) {
    close(c->fd);  /* which also takes it out of the epoll set */
    c->fd = -1;
    c->answering = 0;
    c->in_len = c->out_len = 0;
}

static void want(struct conn *c, uint32_t what) {
    struct epoll_event ev = {0};
    ev.events = what;
    ev.data.u32 = (uint32_t)(c - C);
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Write what is waiting, then `p`; keep what the socket does not take. 0, or -1 when
 * the connection is gone. */
static int put(struct conn *c, const char *p, size_t n) {
    if (!c->out_len) {
        ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (k > 0)
            p += k, n -= (size_t)k;
        if (!n)
            return 0;
        want(c, EPOLLIN | EPOLLOUT);
    }
    if (c->out_len + n > c->out_cap) {
        c->out_cap = 2 * (c->out_len + n);
        if (!(c->out = realloc(c->out, c->out_cap)))
            abort();
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    return 0;
}

static int flush(struct conn *c) {
    ssize_t k = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL);
    if (k < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    memmove(c->out, c->out + k, c->out_len - (size_t)k);
    c->out_len -= (size_t)k;
    if (!c->out_len)
        want(c, EPOLLIN);
    return 0;
}

/* The next event (its write time read last), or the last chunk after them all. */
static int write_event(struct conn *c) {
    char ev[8192], chunk[8300];
    if (c->next == events) {
        c->answering = 0;
        return put(c, "0\r\n\r\n", 5);
    }
    int len = snprintf(ev, sizeof ev, "data: {\"c\": \"%s\", \"i\": %ld, \"t\": %lld, \"pad\": \"%s\"}\n\n",
                       c->id, c->next, (long long)now_ns(), pad);
    int k = snprintf(chunk, sizeof chunk, "%x\r\n%s\r\n", len, ev);
    c->next++;
    c->due += gap_ns;
    return put(c, chunk, (size_t)k);
}

/* A whole request waiting (head and body): take it off and start its answer. */
static int start_answer(struct conn *c) {
    char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end)
        return c->in_len == sizeof c->in ? -1 : 0;  /* a head too long: hang up */
    size_t head = (size_t)(end + 4 - c->in), body = 0;
    *end = '\0';
    for (char *h = strstr(c->in, "\r\n"); h; h = strstr(h + 2, "\r\n"))
        if (!strncasecmp(h + 2, "content-length:", 15))
            body = strtoul(h + 17, NULL, 10);
    if (c->in_len < head + body) {
        *end = '\r';
        return 0;
    }
    const char *q = strstr(c->in, "?c="), *sp = strchr(c->in, ' ');
    size_t idn = 0;
    if (q && sp && q < strchr(sp + 1, ' '))
        for (q += 3; idn + 1 < sizeof c->id && q[idn] && !strchr(" &#", q[idn]); idn++)
            c->id[idn] = q[idn];
    if (!idn)
        c->id[idn++] = '-';
    c->id[idn] = '\0';
    memmove(c->in, c->in + head + body, c->in_len - head - body);
    c->in_len -= head + body;
    c->answering = 1;
    c->next = 0;
    c->due = now_ns();
    if (put(c, HEAD, sizeof HEAD - 1) < 0)
        return -1;
    return write_event(c);
}

static void on_readable(struct conn *c) {
    if (c->in_len == sizeof c->in) {  /* more than a head's worth sent ahead of our answer */
        drop(c);
        return;
    }
    ssize_t k = read(c->fd, c->in + c->in_len, sizeof c->in - c->in_len);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
        drop(c);
        return;
    }
    if (k > 0)
        c->in_len += (size_t)k;
    if (!c->answering && start_answer(c) < 0)
        drop(c);
}

static void on_accept(int lfd) {
    int fd, one = 1;
    while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        size_t i = 0;
        while (i < n_conns && C[i].fd >= 0)
            i++;
        if (i == n_conns) {
            if (n_conns == cap) {
                cap = cap ? 2 * cap : 256;
                if (!(C = realloc(C, cap * sizeof *C)))
                    abort();
            }
            C[n_conns++] = (struct conn){.fd = -1};
        }
        struct conn *c = &C[i];
        c->fd = fd, c->in_len = c->out_len = 0, c->answering = 0;
        struct epoll_event ev = {0};
        ev.events = EPOLLIN;
        ev.data.u32 = (uint32_t)i;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            drop(c);
    }
}

/* Every stream due by now gets its event; then the timer is set to the next deadline. */
static void on_time(int tfd) {
    int64_t t = now_ns(), first = INT64_MAX;
    for (size_t i = 0; i < n_conns; i++) {
        struct conn *c = &C[i];
        if (c->fd < 0 || !c->answering)
            continue;
        if (c->due <= t && write_event(c) < 0) {
            drop(c);
            continue;
        }
        if (!c->answering && start_answer(c) < 0)  /* a request that came meanwhile */
            drop(c);
        else if (c->answering && c->due < first)
            first = c->due;
    }
    struct itimerspec it = {0};
    if (first != INT64_MAX) {
        it.it_value.tv_sec = first / 1000000000;
        it.it_value.tv_nsec = first % 1000000000;
        if (!it.it_value.tv_sec && !it.it_value.tv_nsec)
            it.it_value.tv_nsec = 1;
    }
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &it, NULL);
}

int main(int argc, char **argv) {
    char *stop;
    long pad_len = 60;
    double gap_ms = 0;
    if (argc == 3 || argc == 4) {
        events = strtol(argv[1], &stop, 10);
        gap_ms = *stop ? -1 : strtod(argv[2], &stop);
        if (argc == 4 && !*stop)
            pad_len = strtol(argv[3], &stop, 10);
    }
    if ((argc != 3 && argc != 4) || *stop || events < 0 || gap_ms < 0 || pad_len < 0
        || (size_t)pad_len >= sizeof pad) {
        fprintf(stderr, "usage: %s EVENTS GAP_MS [PAD] (PAD under %zu)\n", argv[0], sizeof pad);
        return 2;
    }
    gap_ns = (int64_t)(gap_ms * 1e6);
    prctl(PR_SET_TIMERSLACK, 1UL);  /* wake at the deadline, not up to 50 us after */
    memset(pad, 'x', (size_t)pad_len);

    struct sockaddr_in addr = {0};
    socklen_t alen = sizeof addr;
    int one = 1;
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event ev = {0};
    if (lfd < 0 || tfd < 0 || (ep = epoll_create1(EPOLL_CLOEXEC)) < 0
        || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0
        || bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(lfd, 4096) < 0
        || getsockname(lfd, (struct sockaddr *)&addr, &alen) < 0)
        return perror("upstream"), 1;
    ev.events = EPOLLIN;
    ev.data.u32 = LISTENER;
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    ev.data.u32 = TIMER;
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
    printf("upstream on 127.0.0.1:%d\n", ntohs(addr.sin_port));
    fflush(stdout);

    struct epoll_event evs[256];
    for (;;) {
        int k = epoll_wait(ep, evs, 256, -1);
        int timed = 0;
        for (int j = 0; j < k; j++) {
            uint32_t u = evs[j].data.u32;
            if (u == LISTENER) {
                on_accept(lfd);
            } else if (u == TIMER) {
                uint64_t ticks;
                if (read(tfd, &ticks, sizeof ticks) < 0 && errno != EAGAIN)
                    return perror("upstream"), 1;
            } else if (C[u].fd >= 0) {
                if ((evs[j].events & EPOLLOUT) && flush(&C[u]) < 0)
                    drop(&C[u]);
                else if (evs[j].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                    on_readable(&C[u]);
            }
            timed = 1;  /* a new answer, a write or a wake: deadlines to see to */
        }
        if (timed)
            on_time(tfd);
    }
}
