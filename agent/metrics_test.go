package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// fakeMachine is a /proc and a cgroup mount of a test's making.
type fakeMachine struct {
	t      *testing.T
	cgroup string
	proc   string
}

func newFakeMachine(t *testing.T) *fakeMachine {
	m := &fakeMachine{t: t, cgroup: t.TempDir(), proc: t.TempDir()}
	m.write(m.proc, "meminfo", "MemTotal:       8000000 kB\nMemFree:        1000000 kB\nMemAvailable:   6000000 kB\n")
	m.write(m.proc, "net/dev", `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  999999      10    0    0    0     0          0         0   999999      10    0    0    0     0       0          0
  eth0:    1000       5    0    0    0     0          0         0      200       2    0    0    0     0       0          0
  eth1:      24       1    0    0    0     0          0         0       16       1    0    0    0     0       0          0
`)
	return m
}

func (m *fakeMachine) write(dir, name, content string) {
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

func (m *fakeMachine) sampler() *sampler {
	return newSampler(metricsSources{cgroupDir: m.cgroup, procDir: m.proc, diskPath: m.t.TempDir(), diskEvery: time.Minute}, 3)
}

func TestSamplesOfACgroupV2Machine(t *testing.T) {
	m := newFakeMachine(t)
	m.write(m.proc, "self/cgroup", "0::/\n")
	m.write(m.cgroup, "cgroup.controllers", "cpu memory pids\n")
	m.write(m.cgroup, "cpu.max", "200000 100000\n") // 2 CPUs
	m.write(m.cgroup, "cpu.stat", "usage_usec 1000000\nuser_usec 900000\n")
	m.write(m.cgroup, "memory.current", "300000000\n")
	m.write(m.cgroup, "memory.stat", "anon 200000000\ninactive_file 100000000\n")
	m.write(m.cgroup, "memory.max", "max\n")
	m.write(m.cgroup, "pids.current", "17\n")
	s := m.sampler()
	start := time.UnixMilli(1_000_000)

	s.take(start)
	if got := s.since(0); len(got) != 0 {
		t.Fatalf("the first reading only primes the CPU's: %+v", got)
	}
	// One CPU of two busy for 5 s: 50 %.
	m.write(m.cgroup, "cpu.stat", "usage_usec 6000000\n")
	s.take(start.Add(5 * time.Second))
	got := s.since(0)
	if len(got) != 1 {
		t.Fatalf("one sample: %+v", got)
	}
	want := sample{At: 1_005_000, CPUPercent: 50, MemoryBytes: 200000000, MemoryLimitBytes: 8000000 * 1024, Pids: 17, RxBytes: 1024, TxBytes: 216}
	got[0].DiskBytes, got[0].DiskLimitBytes = 0, 0
	if got[0] != want {
		t.Fatalf("got %+v\nwant %+v", got[0], want)
	}
}

func TestSamplesOfACgroupV1Machine(t *testing.T) {
	m := newFakeMachine(t)
	// A container's own cgroup is at the root of each controller's mount, whatever /proc/self/cgroup says.
	m.write(m.proc, "self/cgroup", "4:memory:/docker/abc\n2:cpuacct:/docker/abc\n1:cpu:/docker/abc\n8:pids:/docker/abc\n")
	m.write(m.cgroup, "cpuacct/cpuacct.usage", "0\n")
	m.write(m.cgroup, "cpu/cpu.cfs_quota_us", "50000\n") // half a CPU
	m.write(m.cgroup, "cpu/cpu.cfs_period_us", "100000\n")
	m.write(m.cgroup, "memory/memory.usage_in_bytes", "500000000\n")
	m.write(m.cgroup, "memory/memory.stat", "cache 1\ntotal_inactive_file 100000000\n")
	m.write(m.cgroup, "memory/memory.limit_in_bytes", "536870912\n")
	m.write(m.cgroup, "pids/pids.current", "3\n")
	s := m.sampler()
	start := time.UnixMilli(0).Add(time.Hour)
	s.take(start)
	// 2 s of CPU time in 10 s against half a CPU: 40 %.
	m.write(m.cgroup, "cpuacct/cpuacct.usage", strconv.FormatInt(int64(2*time.Second), 10)+"\n")
	s.take(start.Add(10 * time.Second))
	got := s.since(0)[0]
	if got.CPUPercent != 40 || got.MemoryBytes != 400000000 || got.MemoryLimitBytes != 536870912 || got.Pids != 3 {
		t.Fatalf("%+v", got)
	}
	// A limit of "none" (a number near 2^63) is the machine's memory.
	m.write(m.cgroup, "memory/memory.limit_in_bytes", "9223372036854771712\n")
	m.write(m.cgroup, "cpuacct/cpuacct.usage", strconv.FormatInt(int64(20*time.Second), 10)+"\n")
	s.take(start.Add(20 * time.Second))
	got = s.since(0)[1]
	if got.MemoryLimitBytes != 8000000*1024 {
		t.Fatalf("limit: %d", got.MemoryLimitBytes)
	}
	if got.CPUPercent != 100 {
		t.Fatalf("a reading past the quota is the quota: %v", got.CPUPercent)
	}
}

func TestSamplesWithoutCgroups(t *testing.T) {
	m := newFakeMachine(t)
	m.write(m.proc, "stat", "cpu  100 0 100 5000 0 0 0 0 0 0\ncpu0 50 0 50 2500 0 0 0 0 0 0\n")
	for _, pid := range []string{"1", "42", "77"} {
		os.MkdirAll(filepath.Join(m.proc, pid), 0o755)
	}
	s := m.sampler()
	start := time.UnixMilli(0).Add(time.Hour)
	s.take(start)
	// 100 jiffies (1 s) in 1 s: one of the CPUs the agent may run on.
	m.write(m.proc, "stat", "cpu  150 0 150 5000 0 0 0 0 0 0\n")
	s.take(start.Add(time.Second))
	got := s.since(0)[0]
	wantCPU := float64(int64(100/float64(runtime.NumCPU())*10+0.5)) / 10
	if got.CPUPercent != wantCPU || got.MemoryBytes != 2000000*1024 || got.MemoryLimitBytes != 8000000*1024 || got.Pids != 3 {
		t.Fatalf("%+v (cpu %v expected)", got, wantCPU)
	}
}

func TestSamplesAreKeptForAnHourAndReadSinceATime(t *testing.T) {
	m := newFakeMachine(t)
	s := m.sampler() // keeps 3
	start := time.UnixMilli(10_000)
	for i := 0; i <= 5; i++ {
		s.take(start.Add(time.Duration(i) * 5 * time.Second))
	}
	all := s.since(0)
	if len(all) != 3 || all[0].At != 25_000 || all[2].At != 35_000 {
		t.Fatalf("the newest three, oldest first: %+v", all)
	}
	if after := s.since(30_000); len(after) != 1 || after[0].At != 35_000 {
		t.Fatalf("strictly after: %+v", after)
	}
}

func TestAllocatedBytesCountsHardLinksOnce(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a", "b"), 0o755)
	content := make([]byte, 1<<20)
	for i := range content {
		content[i] = byte(i)
	}
	os.WriteFile(filepath.Join(root, "a", "b", "big"), content, 0o644)
	before := allocatedBytes(root)
	if err := os.Link(filepath.Join(root, "a", "b", "big"), filepath.Join(root, "again")); err != nil {
		t.Fatal(err)
	}
	if got := allocatedBytes(root); got != before || got < 1<<20 || got > 2<<20 {
		t.Fatalf("%d then %d", before, got)
	}
}

func TestMetricsRoute(t *testing.T) {
	m := newFakeMachine(t)
	ta := startTestAgent(t, "", func(c *config) {
		c.metrics = metricsSources{cgroupDir: m.cgroup, procDir: m.proc, diskPath: t.TempDir(), diskEvery: time.Minute}
	})
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := 0; i < 3; i++ {
		ta.agent.metrics.take(start.Add(time.Duration(i) * 5 * time.Second))
	}
	read := func(query string) []sample {
		response, err := ta.client.Get("http://agent/v1/metrics" + query)
		if err != nil || response.StatusCode != 200 {
			t.Fatalf("%s: %v %v", query, response, err)
		}
		defer response.Body.Close()
		var body struct{ Data []sample }
		json.NewDecoder(response.Body).Decode(&body)
		return body.Data
	}
	if got := read(""); len(got) != 2 || got[0].DiskLimitBytes <= 0 || got[0].DiskBytes <= 0 {
		t.Fatalf("%+v", got)
	}
	if got := read("?since=2030-01-02T03:04:10Z"); len(got) != 1 {
		t.Fatalf("RFC 3339: %+v", got)
	}
	if got := read("?since=" + strconv.FormatInt(start.Add(5*time.Second).UnixMilli(), 10)); len(got) != 1 {
		t.Fatalf("ms: %+v", got)
	}
	for _, bad := range []string{"yesterday", "-5", "2030-01-02"} {
		ta.errorCode("GET", "/v1/metrics?since="+bad, nil, http.StatusBadRequest)
	}
}
