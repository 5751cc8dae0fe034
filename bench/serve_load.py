#!/usr/bin/env python3
"""Load on nmt-serve: N clients at once on 127.0.0.1, each sending one
sentence per request (POST /translate) from a file of sentences until all
are sent; prints sentences/s, p50 and p99 latency, and how many requests
were refused (503) or failed (anything else, or no answer).

    bench/serve_load.py PORT SENTENCES_FILE CLIENTS [BEAM]

One line of JSON on stdout:
{"clients": N, "sentences": S, "seconds": T, "sentences_per_s": R,
 "p50_ms": ..., "p99_ms": ..., "refused": K, "failed": F, "outputs": [...]}
(outputs: the translations in the file's order, refused ones empty)."""
import http.client
import json
import sys
import threading
import time


def main():
    port, path, clients = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    beam = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    lines = open(path, encoding="utf-8").read().splitlines()
    outputs = [""] * len(lines)
    latencies, refused, failed = [], [0], [0]
    lock = threading.Lock()
    next_line = [0]

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        while True:
            with lock:
                i = next_line[0]
                next_line[0] += 1
            if i >= len(lines):
                break
            body = json.dumps({"text": [lines[i]], "beam_size": beam})
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
                res = conn.getresponse()
                data = res.read()
                status = res.status
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                status, data = -1, b""
            dt = time.perf_counter() - t0
            with lock:
                if status == 200:
                    latencies.append(dt)
                    outputs[i] = json.loads(data)["translations"][0]["text"]
                elif status == 503:
                    refused[0] += 1
                else:
                    failed[0] += 1
        conn.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    latencies.sort()

    def pct(p):
        return round(1000 * latencies[min(len(latencies) - 1, int(p * len(latencies)))], 2) if latencies else None

    print(json.dumps({"clients": clients, "sentences": len(lines), "seconds": round(seconds, 3),
                      "sentences_per_s": round(len(latencies) / seconds, 2), "p50_ms": pct(0.5), "p99_ms": pct(0.99),
                      "refused": refused[0], "failed": failed[0], "outputs": outputs}))


if __name__ == "__main__":
    main()
