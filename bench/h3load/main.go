// h3load: an HTTP/3 load generator for lepus-bench (issue 39), because
// Debian's h2load is built without HTTP/3. Its flags follow h2load's:
//
//	h3load -n 10000 -c 10 -m 10 https://127.0.0.1:8443/      # 10,000 requests
//	h3load -D 3 -c 100 -m 10 https://127.0.0.1:8443/4k.html  # for 3 seconds
//	h3load -idle 1000 https://127.0.0.1:8443/                # hold 1000 idle connections
//
// -c QUIC connections, each with -m requests in flight (streams); the run
// ends after -n requests or -D seconds, whichever comes first. It prints an
// h2load-like summary and one line for lepus-bench,
//
//	LEPUS_BENCH {"protocol":"h3","requests":...,"duration_us":...,...}
//
// with the keys of lepus-bench's wrk report (latency percentiles included).
// -idle N opens N connections, makes one request on each, prints
// LEPUS_BENCH_IDLE {"held":N,"failed":0} and keeps them open (QUIC PINGs keep
// the server's idle timer from closing them) until its standard input closes
// or -hold passes: lepus-bench reads the server's memory in between.
//
// Certificates are not verified: benchmarks use self-signed ones.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

type headerList []string

func (h *headerList) String() string     { return strings.Join(*h, ", ") }
func (h *headerList) Set(v string) error { *h = append(*h, v); return nil }

// seconds accepts h2load's plain number of seconds ("3") or a Go duration ("3s").
type seconds struct{ time.Duration }

func (s *seconds) String() string { return s.Duration.String() }
func (s *seconds) Set(v string) error {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		s.Duration = time.Duration(f * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(v)
	s.Duration = d
	return err
}

type options struct {
	url         string
	requests    int64
	connections int
	streams     int
	duration    time.Duration
	timeout     time.Duration
	headers     headerList
	idle        int
	hold        time.Duration
}

func main() {
	var o options
	var duration, timeout, hold seconds
	timeout.Duration, hold.Duration = 10*time.Second, time.Hour
	flag.Int64Var(&o.requests, "n", 0, "total requests (0: until -D ends the run)")
	flag.IntVar(&o.connections, "c", 1, "QUIC connections")
	flag.IntVar(&o.streams, "m", 1, "requests in flight per connection (streams)")
	flag.Var(&duration, "D", "run for this long (seconds, or a Go duration such as 3s)")
	flag.Var(&timeout, "timeout", "a request that takes longer counts as a timeout")
	flag.Var(&o.headers, "H", "a request header 'Name: value' (repeatable)")
	flag.IntVar(&o.idle, "idle", 0, "hold this many idle connections (one request each), no load")
	flag.Var(&hold, "hold", "with -idle: the longest time to hold them (standard input closing ends it sooner)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: h3load [-n N] [-c N] [-m N] [-D SECONDS] [-H 'Name: value']... URL")
		fmt.Fprintln(os.Stderr, "       h3load -idle N [-hold SECONDS] URL")
		flag.PrintDefaults()
	}
	flag.Parse()
	o.duration, o.timeout, o.hold = duration.Duration, timeout.Duration, hold.Duration
	if flag.NArg() != 1 || !strings.HasPrefix(flag.Arg(0), "https://") ||
		o.connections < 1 || o.streams < 1 || (o.idle == 0 && o.requests <= 0 && o.duration <= 0) {
		flag.Usage()
		os.Exit(2)
	}
	o.url = flag.Arg(0)
	if o.idle > 0 {
		os.Exit(holdIdle(o))
	}
	os.Exit(load(o))
}

// newClient is one QUIC connection: an http3.Transport keeps one connection
// per authority and opens a stream per request on it.
func newClient(o options) (*http.Client, *http3.Transport) {
	transport := &http3.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}},
		// quic-go's client would add Accept-Encoding: gzip and unzip the answers;
		// h2load sends only the -H headers, so the h3 rows must too.
		DisableCompression: true,
		QUICConfig: &quic.Config{
			MaxIdleTimeout:  5 * time.Minute,
			KeepAlivePeriod: 10 * time.Second, // for -idle: the server's idle timer sees traffic
			// Windows large enough that a 10 MiB answer is not held back by the client.
			InitialStreamReceiveWindow:     16 << 20,
			MaxStreamReceiveWindow:         16 << 20,
			InitialConnectionReceiveWindow: 32 << 20,
			MaxConnectionReceiveWindow:     64 << 20,
		},
	}
	return &http.Client{Transport: transport, Timeout: o.timeout}, transport
}

func newRequest(o options) (*http.Request, error) {
	request, err := http.NewRequest(http.MethodGet, o.url, nil)
	if err != nil {
		return nil, err
	}
	for _, line := range o.headers {
		name, value, _ := strings.Cut(line, ":")
		if strings.EqualFold(strings.TrimSpace(name), "host") {
			request.Host = strings.TrimSpace(value) // :authority
			continue
		}
		request.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	return request, nil
}

type outcome int

const (
	succeeded outcome = iota
	statusError
	connectError
	readError
	timedOut
)

// fetchOnce makes one request and reads the whole body.
func fetchOnce(client *http.Client, o options) (outcome, int, int64) {
	request, err := newRequest(o)
	if err != nil {
		return connectError, 0, 0
	}
	response, err := client.Do(request)
	if err != nil {
		if isTimeout(err) {
			return timedOut, 0, 0
		}
		return connectError, 0, 0
	}
	n, err := io.Copy(io.Discard, response.Body)
	response.Body.Close()
	if err != nil {
		if isTimeout(err) {
			return timedOut, response.StatusCode, n
		}
		return readError, response.StatusCode, n
	}
	if response.StatusCode < 200 || response.StatusCode > 299 {
		return statusError, response.StatusCode, n
	}
	return succeeded, response.StatusCode, n
}

func isTimeout(err error) bool {
	if errors, ok := err.(interface{ Timeout() bool }); ok && errors.Timeout() {
		return true
	}
	return strings.Contains(err.Error(), "deadline exceeded") || strings.Contains(err.Error(), "timeout")
}

type stats struct {
	mu        sync.Mutex
	latencies []time.Duration
	outcomes  [5]int64
	statuses  [6]int64 // by hundreds: 1xx .. 5xx
	bytes     int64
}

func (s *stats) add(latencies []time.Duration, outcomes [5]int64, statuses [6]int64, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latencies = append(s.latencies, latencies...)
	for i := range outcomes {
		s.outcomes[i] += outcomes[i]
	}
	for i := range statuses {
		s.statuses[i] += statuses[i]
	}
	s.bytes += bytes
}

// load runs the -n/-D workload: -c connections x -m workers, each worker a
// loop of one request at a time on its connection.
func load(o options) int {
	var issued atomic.Int64
	start := time.Now()
	deadline := start.Add(o.duration)
	more := func() bool {
		if o.requests > 0 && issued.Add(1) > o.requests {
			return false
		}
		return o.duration <= 0 || time.Now().Before(deadline)
	}
	var all stats
	var wg sync.WaitGroup
	transports := make([]*http3.Transport, 0, o.connections)
	for c := 0; c < o.connections; c++ {
		client, transport := newClient(o)
		transports = append(transports, transport)
		var connected atomic.Bool // a connection that never answered stops at its first error
		for m := 0; m < o.streams; m++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var latencies []time.Duration
				var outcomes [5]int64
				var statuses [6]int64
				var bytes int64
				for more() {
					began := time.Now()
					result, status, n := fetchOnce(client, o)
					latencies = append(latencies, time.Since(began))
					outcomes[result]++
					if status >= 100 && status < 600 {
						statuses[status/100]++
					}
					bytes += n
					if result == succeeded || result == statusError {
						connected.Store(true)
					} else if !connected.Load() {
						break
					}
				}
				all.add(latencies, outcomes, statuses, bytes)
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, transport := range transports {
		transport.Close()
	}
	report(&all, elapsed)
	if all.outcomes[succeeded]+all.outcomes[statusError] == 0 {
		return 1
	}
	return 0
}

func percentile(sorted []time.Duration, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i].Microseconds()
}

func report(s *stats, elapsed time.Duration) {
	sort.Slice(s.latencies, func(i, j int) bool { return s.latencies[i] < s.latencies[j] })
	done := int64(len(s.latencies))
	answered := s.outcomes[succeeded] + s.outcomes[statusError]
	secs := elapsed.Seconds()
	failed := done - answered
	fmt.Printf("finished in %.2fs, %.2f req/s, %.2fMB/s\n", secs, float64(answered)/secs,
		float64(s.bytes)/secs/1e6)
	fmt.Printf("requests: %d total, %d started, %d done, %d succeeded, %d failed, %d errored, %d timeout\n",
		done, done, done, s.outcomes[succeeded], failed, failed-s.outcomes[timedOut], s.outcomes[timedOut])
	fmt.Printf("status codes: %d 2xx, %d 3xx, %d 4xx, %d 5xx\n", s.statuses[2], s.statuses[3],
		s.statuses[4], s.statuses[5])
	line, _ := json.Marshal(map[string]any{
		"protocol": "h3", "requests": answered, "duration_us": elapsed.Microseconds(),
		"bytes": s.bytes, "p50_us": percentile(s.latencies, 0.50),
		"p90_us": percentile(s.latencies, 0.90), "p99_us": percentile(s.latencies, 0.99),
		"max_us":         percentile(s.latencies, 1.0),
		"connect_errors": s.outcomes[connectError], "read_errors": s.outcomes[readError],
		"write_errors": 0, "timeouts": s.outcomes[timedOut], "status_errors": s.outcomes[statusError],
	})
	fmt.Printf("LEPUS_BENCH %s\n", line)
}

// holdIdle opens o.idle connections (50 handshakes at a time), one request
// each, and holds them until standard input closes, a signal, or -hold.
func holdIdle(o options) int {
	transports := make([]*http3.Transport, o.idle)
	var held, failed atomic.Int64
	var wg sync.WaitGroup
	slots := make(chan struct{}, 50)
	for i := range transports {
		client, transport := newClient(o)
		transports[i] = transport
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			if result, _, _ := fetchOnce(client, o); result == succeeded {
				held.Add(1)
			} else {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	line, _ := json.Marshal(map[string]int64{"held": held.Load(), "failed": failed.Load()})
	fmt.Printf("LEPUS_BENCH_IDLE %s\n", line)
	os.Stdout.Sync()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	stdinClosed := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(stdinClosed) }()
	select {
	case <-ctx.Done():
	case <-stdinClosed:
	case <-time.After(o.hold):
	}
	for _, transport := range transports {
		transport.Close()
	}
	if held.Load() == 0 {
		return 1
	}
	return 0
}
