#!/usr/bin/env python3
"""pprof-groups.py BINARY PROFILE: the samples of a CPU profile of
tide bench --dev (brokers and client in one process) grouped into broker
code, client code, kernel time by system call (and whose call it was),
GC and the runtime, as shares of the profile's samples
(docs/benchmarks.md, Issue 15's targets). It reads `go tool pprof -traces`.
A sample is the client's when its stack has franz-go or the bench's own
loops and values in it, the broker's when it has tide's internal packages,
looking from the leaf down; the temporary directory's removal at the end
of the run is counted apart (teardown).

    tide bench produce --dev 3 --size 1024 --mode throughput --duration 10s --cpuprofile /tmp/p.prof
    python3 docs/measure/pprof-groups.py /tmp/tide /tmp/p.prof
"""
import subprocess, sys, re, collections
out = subprocess.run(["go", "tool", "pprof", "-traces", sys.argv[1], sys.argv[2]], capture_output=True, text=True).stdout
blocks = out.split("-----------+-------------------------------------------------------")
def ms(v):
    m = re.match(r"\s*([\d.]+)(ms|s|us|µs)", v)
    n = float(m.group(1)); u = m.group(2)
    return n * {"ms": 1, "s": 1000, "us": 0.001, "µs": 0.001}[u]
def owner(frames):
    for f in frames:
        if "franz-go" in f or f.startswith("main.(*valueSource)") or f.startswith("main.runThroughput") or f.startswith("main.runLatency") or f.startswith("main.(*rangeReaders)"):
            return "client"
        if "tidelog/tide/internal/" in f:
            return "broker"
    return "?"
def classify(frames):
    text = "\n".join(frames)
    who = owner(frames)
    if "linux.Syscall6" in frames[0] or "syscall.RawSyscall" in frames[0] or frames[0].startswith("syscall."):
        if "Unlinkat" in text: return "teardown: removing the run's directory", who
        if "Fsync" in text or "Fdatasync" in text: return "kernel: fsync", who
        if "sendfile" in text.lower(): return "kernel: sendfile", who
        if "Writev" in text or "writev" in text: return "kernel: socket writev", who
        if "net.(*netFD).Write" in text or "net.(*conn).Write" in text: return "kernel: socket write", who
        if "os.(*File).Write" in text or "Pwrite" in text or "pwrite" in text: return "kernel: file write", who
        if "net.(*netFD).Read" in text or "net.(*conn).Read" in text: return "kernel: socket read", who
        if "os.(*File).Read" in text or "Pread" in text or "pread" in text: return "kernel: file read", who
        if "EpollWait" in text or "netpoll" in text: return "kernel: epoll", who
        return "kernel: other syscalls", who
    if "runtime.futex" in text or "runtime.usleep" in text or "runtime.osyield" in text:
        return "runtime: futex/usleep (thread sleep and wake)", who
    if "runtime.netpoll" in text: return "kernel: epoll", who
    if any(k in text for k in ("gcBgMarkWorker", "gcAssistAlloc", "bgsweep", "bgscavenge", "runtime.gcDrain", "markroot", "runtime.GC")):
        return "GC", who
    if who != "?":
        return who, who
    return "runtime: scheduler and other", who
totals = collections.Counter(); split = collections.Counter()
for b in blocks:
    lines = [l for l in b.strip("\n").split("\n") if l.strip()]
    if not lines or not re.match(r"\s*[\d.]+(ms|s|us|µs)\s", lines[0]): continue
    value = ms(lines[0])
    first = lines[0].split(None, 1)[1].strip()
    frames = [first] + [l.strip() for l in lines[1:]]
    cat, who = classify(frames)
    totals[cat] += value; split[(cat, who)] += value
total = sum(totals.values())
print("total samples %.2f s" % (total / 1000))
for cat, v in totals.most_common():
    parts = ", ".join("%s %.1f%%" % (w, 100 * split[(cat, w)] / total) for w in ("broker", "client", "?") if split[(cat, w)] and cat.startswith(("kernel", "runtime: futex", "GC")))
    print("%-48s %6.2f s %5.1f%%   %s" % (cat, v / 1000, 100 * v / total, parts))
