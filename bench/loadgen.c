/* loadgen: the load client of bench/replay.py and bench/reliability.py (C99 for Linux:
 * epoll, no dependencies), compiled and run by bench/_loadgen.py.
 *
 *   gcc -O2 -std=c99 -Wall -Wextra -Werror -o loadgen bench/loadgen.c
 *   loadgen [-e] [-t] PORT REQUEST_FILE N STAGGER_S SEED [EVERY:AFTER]
 *
 * Why C: on two cores the Python client cost nearly as much CPU per piece as the
 * server it measured, so a capacity figure measured the client too, and its own
 * scheduling showed up as the server's timing error.
 *
 * It opens N connections to 127.0.0.1:PORT, stream i at a time drawn uniformly from
 * [0, STAGGER_S) (splitmix64 seeded with SEED; with -e, at i * STAGGER_S / N), sends the bytes of REQUEST_FILE on
 * each, and parses the HTTP/1.1 response head and chunked body itself. A chunk is
 * stamped with CLOCK_MONOTONIC (Python's time.perf_counter_ns on Linux) read right
 * after the read() that completed it (its data and the CRLF after it), as the
 * asyncio client does. A stream ends at the 0-size chunk (and its trailers) or when
 * the server closes. It never spins: epoll_wait blocks until the next scheduled
 * connect (or forever once all are open).
 *
 * EVERY:AFTER, a client hanging up mid-stream: each stream whose index is a multiple
 * of EVERY (0 included) closes its connection as soon as its AFTER-th chunk is
 * complete, whatever else the same read() brought (both at least 1).
 *
 * -t, stamped events (bench/upstream.c's): each chunk's write time is the decimal number
 * after the first `"t": ` in its data (0 if there is none), printed after its stream's line.
 *
 * Output, one line per stream in index order (with -t, each followed by its write times),
 * then the client's CPU:
 *   s INDEX STATUS HTTP_STATUS BODY_BYTES FNV1A CHUNKS T1 .. TCHUNKS  (times in ns)
 *   t INDEX W1 .. WCHUNKS                        (with -t)
 *   cpu SECONDS                                  (user + system, getrusage)
 * BODY_BYTES and FNV1A (16 hex digits): the count and the 64-bit FNV-1a hash of the
 * body's bytes without the chunked framing (what the stream read of it, the whole body
 * if its STATUS is ok), so a caller can check it byte for byte without the bodies.
 * STATUS: ok (the 0-size chunk arrived), hangup (this client left on purpose, after
 * AFTER chunks), eof (the server closed before the end), bad (not a chunked HTTP/1.1
 * response), or the errno name of a failed connect, send or read (e.g. ECONNREFUSED).
 * Exit status 2 only for bad arguments or an unreadable file.
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum state { CONNECTING, STATUS_LINE, HEADERS, SIZE, DATA, DATA_END, TRAILERS, ENDED };

struct stream {
    int64_t start_ns;            /* scheduled connect, after t0 */
    int fd;
    enum state st;
    const char *status;          /* set when the stream ends */
    int http_status, chunked;
    size_t sent, left, body;     /* request bytes sent, chunk bytes still due, body bytes */
    uint64_t fnv;                /* FNV-1a of the body bytes so far */
    size_t hang_after;           /* close after this many chunks (0: read to the end) */
    char line[128];              /* the current line of the head, a size or a trailer */
    size_t line_len;
    int64_t *at;                 /* chunk arrival times */
    int64_t *w;                  /* with -t: their write times */
    size_t n, cap;
    int64_t stamp;               /* with -t: the current chunk's number after `"t": ` */
    unsigned char matched;       /* how much of `"t": ` is matched; MATCHED: in the number */
};

static const char MARK[] = "\"t\": ";
#define MARKED (sizeof MARK - 1)
#define DONE (MARKED + 1)

static struct stream *S;
static const char *request;
static size_t request_len;
static int ep, ended, stamps;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int by_start(const void *a, const void *b) {
    int64_t x = S[*(const size_t *)a].start_ns, y = S[*(const size_t *)b].start_ns;
    return (x > y) - (x < y);
}

static void end(struct stream *s, const char *status) {
    if (s->fd >= 0)
        close(s->fd);  /* which also takes it out of the epoll set */
    s->fd = -1;
    s->st = ENDED;
    s->status = status;
    ended++;
}

static void fail(struct stream *s, int err) {
    const char *name = strerrorname_np(err);
    end(s, name ? name : "error");
}

/* Connect without waiting; 0 or the errno of the failure. */
static int start(struct stream *s, uint32_t index, uint16_t port) {
    struct sockaddr_in addr = {0};
    struct epoll_event ev = {0};
    int one = 1;
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ev.events = EPOLLOUT;
    ev.data.u32 = index;
    if ((s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0
        || setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0
        || (connect(s->fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS)
        || epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev) < 0)
        return errno;
    return 0;
}

/* Connected: send what is left of the request, then wait for the response. */
static int send_request(struct stream *s) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
        return err ? err : errno;
    ssize_t k = send(s->fd, request + s->sent, request_len - s->sent, MSG_NOSIGNAL);
    if (k < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : errno;
    s->sent += (size_t)k;
    if (s->sent == request_len) {
        struct epoll_event ev = {0};
        ev.events = EPOLLIN;
        ev.data.u32 = (uint32_t)(s - S);
        s->st = STATUS_LINE;
        if (epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &ev) < 0)
            return errno;
    }
    return 0;
}

/* One line (CRLF stripped) of the head, a chunk size, a chunk's end or a trailer, read
 * at time t; the stream's status if it ends here, else NULL. */
static const char *on_line(struct stream *s, const char *line, int64_t t) {
    char *stop;
    switch (s->st) {
    case STATUS_LINE:
        if (strncmp(line, "HTTP/1.", 7) || strlen(line) < 12)
            return "bad";
        s->http_status = atoi(line + 9);
        s->st = HEADERS;
        break;
    case HEADERS:
        if (!*line) {
            s->st = SIZE;
            return s->chunked ? NULL : "bad";
        }
        if (!strncasecmp(line, "transfer-encoding:", 18) && strcasestr(line, "chunked"))
            s->chunked = 1;
        break;
    case SIZE:
        s->left = strtoul(line, &stop, 16);
        if (stop == line)
            return "bad";
        s->st = s->left ? DATA : TRAILERS;
        s->stamp = 0, s->matched = 0;
        break;
    case DATA_END:  /* the CRLF after its data completes a chunk */
        if (*line)
            return "bad";
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 128;
            if (!(s->at = realloc(s->at, s->cap * sizeof *s->at))
                || (stamps && !(s->w = realloc(s->w, s->cap * sizeof *s->w))))
                abort();
        }
        if (stamps)
            s->w[s->n] = s->stamp;
        s->at[s->n++] = t;
        s->st = SIZE;
        if (s->n == s->hang_after)
            return "hangup";
        break;
    case TRAILERS:  /* after the 0-size chunk, up to an empty line */
        return *line ? NULL : "ok";
    default:
        break;
    }
    return NULL;
}

/* Response bytes all read at time t: a chunk may span reads, and a read hold many. */
static void feed(struct stream *s, const char *p, size_t n, int64_t t) {
    while (n && s->st != ENDED) {
        if (s->st == DATA) {
            size_t take = n < s->left ? n : s->left;
            for (size_t i = 0; i < take; i++)
                s->fnv = (s->fnv ^ (unsigned char)p[i]) * 0x100000001b3ULL;
            for (size_t i = 0; stamps && i < take && s->matched != DONE; i++) {
                char c = p[i];
                if (s->matched == MARKED)  /* in the number: its digits, up to the first other */
                    s->matched = c >= '0' && c <= '9' ? (s->stamp = 10 * s->stamp + (c - '0'), MARKED) : DONE;
                else
                    s->matched = c == MARK[s->matched] ? s->matched + 1 : c == MARK[0];
            }
            p += take, n -= take, s->left -= take, s->body += take;
            if (!s->left)
                s->st = DATA_END;
            continue;
        }
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;
        size_t room = sizeof s->line - 1 - s->line_len;  /* a longer line is cut short */
        size_t keep = take < room ? take : room;
        memcpy(s->line + s->line_len, p, keep);
        s->line_len += keep;
        p += take, n -= take;
        if (!nl)
            break;
        p++, n--;
        if (s->line_len && s->line[s->line_len - 1] == '\r')
            s->line_len--;
        s->line[s->line_len] = '\0';
        s->line_len = 0;
        const char *status = on_line(s, s->line, t);
        if (status)
            end(s, status);
    }
}

static void on_event(struct stream *s) {
    static char buf[65536];
    int err = 0;
    if (s->st == CONNECTING) {
        err = send_request(s);
    } else {
        ssize_t k = read(s->fd, buf, sizeof buf);
        int64_t t = now_ns();
        if (k > 0)
            feed(s, buf, (size_t)k, t);
        else if (k == 0)
            end(s, "eof");
        else if (errno != EAGAIN && errno != EINTR)
            err = errno;
    }
    if (err)
        fail(s, err);
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    long size;
    if (f && !fseek(f, 0, SEEK_END) && (size = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET)
        && (data = malloc((size_t)size)) && fread(data, 1, (size_t)size, f) == (size_t)size)
        *len = (size_t)size;
    else
        free(data), data = NULL;
    if (f)
        fclose(f);
    return data;
}

int main(int argc, char **argv) {
    int even = 0, opt;
    while ((opt = getopt(argc, argv, "+et")) != -1) {
        if (opt == 'e')
            even = 1;
        else if (opt == 't')
            stamps = 1;
        else
            argc = 0;  /* the usage below */
    }
    argc -= optind - 1, argv += optind - 1;
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: loadgen [-e] [-t] PORT REQUEST_FILE N STAGGER_S SEED [EVERY:AFTER]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    long count = atol(argv[3]);
    double stagger = atof(argv[4]);
    uint64_t seed = strtoull(argv[5], NULL, 10);
    if (port <= 0 || port > 65535 || count <= 0 || count > UINT32_MAX || stagger < 0) {
        fprintf(stderr, "loadgen: bad PORT, N or STAGGER_S\n");
        return 2;
    }
    size_t n = (size_t)count;
    unsigned long every = 0, after = 0;  /* the hang-up rule, if any */
    if (argc == 7) {
        char *colon, *stop;
        every = strtoul(argv[6], &colon, 10);
        after = *colon == ':' ? strtoul(colon + 1, &stop, 10) : 0;
        if (colon == argv[6] || *colon != ':' || stop == colon + 1 || *stop || !every || !after) {
            fprintf(stderr, "loadgen: bad EVERY:AFTER (two numbers, both at least 1)\n");
            return 2;
        }
    }
    if (!(request = read_file(argv[2], &request_len))) {
        fprintf(stderr, "loadgen: cannot read %s\n", argv[2]);
        return 2;
    }
    struct rlimit rl;  /* thousands of sockets: as many descriptors as we may have */
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    S = calloc(n, sizeof *S);
    size_t *order = malloc(n * sizeof *order);
    if (!S || !order || (ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return perror("loadgen"), 1;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(splitmix64(&seed) >> 11) / 9007199254740992.0;  /* [0, 1) */
        S[i].start_ns = (int64_t)((even ? (double)i / (double)n : u) * stagger * 1e9);
        S[i].fd = -1;
        S[i].fnv = 0xcbf29ce484222325ULL;  /* the FNV-1a offset basis */
        S[i].hang_after = every && i % every == 0 ? after : 0;
        order[i] = i;
    }
    qsort(order, n, sizeof *order, by_start);

    struct epoll_event evs[256];
    size_t next = 0;
    int64_t t0 = now_ns();
    while ((size_t)ended < n) {
        int64_t due = 0;
        while (next < n && (due = S[order[next]].start_ns - (now_ns() - t0)) <= 0) {
            int err = start(&S[order[next]], (uint32_t)order[next], (uint16_t)port);
            if (err)
                fail(&S[order[next]], err);
            next++;
        }
        /* until the next connect is due (rounded up: never a spin), or an event */
        int timeout = next < n ? (int)((due + 999999) / 1000000) : -1;
        int k = epoll_wait(ep, evs, 256, timeout);
        for (int j = 0; j < k; j++)
            if (S[evs[j].data.u32].st != ENDED)
                on_event(&S[evs[j].data.u32]);
    }

    for (size_t i = 0; i < n; i++) {
        struct stream *s = &S[i];
        printf("s %zu %s %d %zu %016llx %zu", i, s->status, s->http_status, s->body,
               (unsigned long long)s->fnv, s->n);
        for (size_t j = 0; j < s->n; j++)
            printf(" %lld", (long long)s->at[j]);
        putchar('\n');
        if (stamps) {
            printf("t %zu", i);
            for (size_t j = 0; j < s->n; j++)
                printf(" %lld", (long long)s->w[j]);
            putchar('\n');
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("cpu %.6f\n", (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec)
                             + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
    return 0;
}
