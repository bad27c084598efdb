-- Printed by wrk when the run ends: one JSON line lepus-bench parses, so it
-- does not depend on wrk's human-readable units (us/ms/s, k/M).
done = function(summary, latency, requests)
   io.write(string.format(
      'LEPUS_BENCH {"requests": %d, "duration_us": %d, "bytes": %d, ' ..
      '"connect_errors": %d, "read_errors": %d, "write_errors": %d, ' ..
      '"status_errors": %d, "timeouts": %d, "p50_us": %d, "p90_us": %d, ' ..
      '"p99_us": %d, "max_us": %d}\n',
      summary.requests, summary.duration, summary.bytes,
      summary.errors.connect, summary.errors.read, summary.errors.write,
      summary.errors.status, summary.errors.timeout,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
