package main

import (
	"bufio"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// sample is the machine's use of its resources at one moment (API.md, "Metrics").
type sample struct {
	At               int64   `json:"at"`
	CPUPercent       float64 `json:"cpuPercent"`
	MemoryBytes      int64   `json:"memoryBytes"`
	MemoryLimitBytes int64   `json:"memoryLimitBytes"`
	DiskBytes        int64   `json:"diskBytes"`
	DiskLimitBytes   int64   `json:"diskLimitBytes"`
	Pids             int64   `json:"pids"`
	RxBytes          int64   `json:"rxBytes"`
	TxBytes          int64   `json:"txBytes"`
}

// metricsSources is where the figures are read: the machine's in production, a test's fake directories otherwise.
type metricsSources struct {
	cgroupDir string        // the cgroup filesystem's mount (/sys/fs/cgroup)
	procDir   string        // /proc
	diskPath  string        // the machine's root filesystem
	diskEvery time.Duration // how often a filesystem that statfs cannot measure (btrfs) is walked
}

// sampler keeps the last `kept` samples, oldest first.
type sampler struct {
	sources metricsSources
	kept    int

	mu       sync.Mutex
	samples  []sample
	lastCPU  cpuReading
	disk     diskUsage
	diskRead time.Time
}

type cpuReading struct {
	usageNs int64 // CPU time the machine used, all its CPUs together
	at      time.Time
}

type diskUsage struct{ used, total int64 }

func newSampler(sources metricsSources, kept int) *sampler {
	return &sampler{sources: sources, kept: kept}
}

// run samples every `every` until the agent ends; the first tick only primes the CPU reading.
func (s *sampler) run(every time.Duration) {
	s.take(time.Now())
	for now := range time.Tick(every) {
		s.take(now)
	}
}

// take reads every figure once; the CPU's is the use since the last reading, so the first reading makes no sample.
func (s *sampler) take(now time.Time) {
	cpu := cpuReading{usageNs: s.cpuUsageNs(), at: now}
	s.mu.Lock()
	last := s.lastCPU
	s.lastCPU = cpu
	s.mu.Unlock()
	if last.at.IsZero() || !now.After(last.at) {
		s.diskUsage(now) // the first walk of a large disk happens now, not in the first sample
		return
	}
	memory, memoryLimit := s.memory()
	rx, tx := s.network()
	disk := s.diskUsage(now)
	next := sample{
		At:               now.UnixMilli(),
		CPUPercent:       cpuPercent(cpu.usageNs-last.usageNs, now.Sub(last.at), s.cpuLimit()),
		MemoryBytes:      memory,
		MemoryLimitBytes: memoryLimit,
		DiskBytes:        disk.used,
		DiskLimitBytes:   disk.total,
		Pids:             s.pids(),
		RxBytes:          rx,
		TxBytes:          tx,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == s.kept {
		s.samples = append(s.samples[:0], s.samples[1:]...)
	}
	s.samples = append(s.samples, next)
}

// since answers the samples taken after the time (epoch ms), oldest first.
func (s *sampler) since(afterMs int64) []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := []sample{}
	for _, each := range s.samples {
		if each.At > afterMs {
			found = append(found, each)
		}
	}
	return found
}

// cpuPercent is the share of the machine's CPUs used over the interval: 100 when all of them were busy.
func cpuPercent(usedNs int64, over time.Duration, cpus float64) float64 {
	if usedNs <= 0 || over <= 0 || cpus <= 0 {
		return 0
	}
	percent := float64(usedNs) / float64(over.Nanoseconds()) / cpus * 100
	if percent > 100 {
		// The quota is enforced per period: a reading a little past it is the clocks', not the machine's.
		percent = 100
	}
	return float64(int64(percent*10+0.5)) / 10
}

// --- cgroups: v2 (one tree) or v1 (one tree per controller) ---

// cgroupFile is the first of the named files that exists: in the agent's own
// cgroup, then at the root of the mount (a container sees its own cgroup
// there, whatever /proc/self/cgroup says); "" when none exists.
func (s *sampler) cgroupFile(controllers []string, names ...string) string {
	own := s.ownCgroups()
	for _, name := range names {
		for _, controller := range controllers {
			for _, dir := range []string{own[controller], ""} {
				path := filepath.Join(s.sources.cgroupDir, controller, dir, name)
				if _, err := os.Stat(path); err == nil {
					return path
				}
			}
		}
	}
	return ""
}

// ownCgroups maps each controller's mount directory ("" for v2) to the agent's cgroup in it, from /proc/self/cgroup.
func (s *sampler) ownCgroups() map[string]string {
	own := map[string]string{}
	text, err := os.ReadFile(filepath.Join(s.sources.procDir, "self", "cgroup"))
	if err != nil {
		return own
	}
	for _, line := range strings.Split(string(text), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		own[parts[1]] = parts[2]
		for _, controller := range strings.Split(parts[1], ",") {
			own[controller] = parts[2]
		}
	}
	return own
}

var (
	v2         = []string{""}
	v1CPU      = []string{"cpuacct", "cpu,cpuacct", "cpu"}
	v1Memory   = []string{"memory"}
	v1Pids     = []string{"pids"}
	cgroupsAny = func(v1 []string) []string { return append(append([]string{}, v2...), v1...) }
)

func (s *sampler) cpuUsageNs() int64 {
	if path := s.cgroupFile(v2, "cpu.stat"); path != "" {
		if usec, ok := keyedValue(path, "usage_usec"); ok {
			return usec * 1000
		}
	}
	if path := s.cgroupFile(v1CPU, "cpuacct.usage"); path != "" {
		if ns, err := readInt(path); err == nil {
			return ns
		}
	}
	// No cgroup: the whole system's busy time, in USER_HZ (100 a second on every Linux that matters).
	line := firstLine(filepath.Join(s.sources.procDir, "stat"))
	fields := strings.Fields(line)
	var busy int64
	for i, field := range fields {
		if i == 0 || i == 4 || i == 5 || i > 8 { // the name, idle, iowait; guest time is counted in user already
			continue
		}
		value, _ := strconv.ParseInt(field, 10, 64)
		busy += value
	}
	return busy * int64(time.Second/100)
}

// cpuLimit is how many CPUs the machine may use: its cgroup's quota, else the CPUs the agent may run on.
func (s *sampler) cpuLimit() float64 {
	cpus := float64(runtime.NumCPU())
	quota, period := int64(-1), int64(0)
	if path := s.cgroupFile(v2, "cpu.max"); path != "" {
		fields := strings.Fields(firstLine(path))
		if len(fields) == 2 && fields[0] != "max" {
			quota, _ = strconv.ParseInt(fields[0], 10, 64)
			period, _ = strconv.ParseInt(fields[1], 10, 64)
		}
	} else if path := s.cgroupFile([]string{"cpu", "cpu,cpuacct"}, "cpu.cfs_quota_us"); path != "" {
		quota, _ = readInt(path)
		period, _ = readInt(filepath.Join(filepath.Dir(path), "cpu.cfs_period_us"))
	}
	if quota > 0 && period > 0 && float64(quota)/float64(period) < cpus {
		return float64(quota) / float64(period)
	}
	return cpus
}

// memory is what the machine uses as `docker stats` counts it (less the page cache it could drop), and its limit.
func (s *sampler) memory() (used, limit int64) {
	total := s.memTotal()
	limit = total
	if path := s.cgroupFile(v2, "memory.current"); path != "" {
		used, _ = readInt(path)
		used -= valueOr(keyedValue(filepath.Join(filepath.Dir(path), "memory.stat"), "inactive_file"))
		if max, err := readInt(filepath.Join(filepath.Dir(path), "memory.max")); err == nil && max > 0 && max < limit {
			limit = max
		}
	} else if path := s.cgroupFile(v1Memory, "memory.usage_in_bytes"); path != "" {
		used, _ = readInt(path)
		used -= valueOr(keyedValue(filepath.Join(filepath.Dir(path), "memory.stat"), "total_inactive_file"))
		// v1 says "no limit" with a number near 2^63.
		if max, err := readInt(filepath.Join(filepath.Dir(path), "memory.limit_in_bytes")); err == nil && max > 0 && max < limit {
			limit = max
		}
	} else {
		used = total - s.meminfo("MemAvailable")
	}
	if used < 0 {
		used = 0
	}
	return used, limit
}

func (s *sampler) memTotal() int64 { return s.meminfo("MemTotal") }

// meminfo is a /proc/meminfo figure in bytes.
func (s *sampler) meminfo(key string) int64 {
	kib, _ := keyedValue(filepath.Join(s.sources.procDir, "meminfo"), key+":")
	return kib * 1024
}

func (s *sampler) pids() int64 {
	if path := s.cgroupFile(cgroupsAny(v1Pids), "pids.current"); path != "" {
		if count, err := readInt(path); err == nil {
			return count
		}
	}
	entries, _ := os.ReadDir(s.sources.procDir)
	var count int64
	for _, entry := range entries {
		if _, err := strconv.Atoi(entry.Name()); err == nil && entry.IsDir() {
			count++
		}
	}
	return count
}

// network is the bytes received and sent since the machine started, on every interface but loopback.
func (s *sampler) network() (rx, tx int64) {
	file, err := os.Open(filepath.Join(s.sources.procDir, "net", "dev"))
	if err != nil {
		return 0, 0
	}
	defer file.Close()
	lines := bufio.NewScanner(file)
	for lines.Scan() {
		name, counters, found := strings.Cut(lines.Text(), ":")
		if !found || strings.TrimSpace(name) == "lo" {
			continue
		}
		fields := strings.Fields(counters)
		if len(fields) < 9 {
			continue
		}
		received, _ := strconv.ParseInt(fields[0], 10, 64)
		sent, _ := strconv.ParseInt(fields[8], 10, 64)
		rx += received
		tx += sent
	}
	return rx, tx
}

// --- The disk ---

const btrfsMagic = 0x9123683e

// diskUsage is the root filesystem's use and size. statfs answers both, but
// on btrfs it answers for the engine's whole filesystem, not the quota group
// that holds the machine to its size: there the machine's files are counted
// (a walk, at most every diskEvery) and the size is the filesystem's (the
// service knows the machine's limit and answers the smaller).
func (s *sampler) diskUsage(now time.Time) diskUsage {
	var stat syscall.Statfs_t
	if err := syscall.Statfs(s.sources.diskPath, &stat); err != nil {
		return diskUsage{}
	}
	blockSize := int64(stat.Bsize)
	usage := diskUsage{used: int64(stat.Blocks-stat.Bfree) * blockSize, total: int64(stat.Blocks) * blockSize}
	if stat.Type != btrfsMagic {
		return usage
	}
	s.mu.Lock()
	fresh := !s.diskRead.IsZero() && now.Sub(s.diskRead) < s.sources.diskEvery
	cached := s.disk
	s.mu.Unlock()
	if fresh {
		return diskUsage{used: cached.used, total: usage.total}
	}
	usage.used = allocatedBytes(s.sources.diskPath)
	s.mu.Lock()
	s.disk, s.diskRead = usage, now
	s.mu.Unlock()
	return usage
}

// allocatedBytes counts the blocks of every file under root on root's own
// filesystem (not /proc, /dev or anything mounted), each hard-linked file once.
func allocatedBytes(root string) int64 {
	var rootStat syscall.Stat_t
	if err := syscall.Lstat(root, &rootStat); err != nil {
		return 0
	}
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone, or not ours to read: what can be read is counted
		}
		info, err := entry.Info()
		if err != nil {
			return nil
		}
		stat, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if uint64(stat.Dev) != uint64(rootStat.Dev) {
			if entry.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if stat.Nlink > 1 && !entry.IsDir() {
			key := inode{uint64(stat.Dev), uint64(stat.Ino)}
			if seen[key] {
				return nil
			}
			seen[key] = true
		}
		total += int64(stat.Blocks) * 512
		return nil
	})
	return total
}

// --- Files of numbers ---

func readInt(path string) (int64, error) {
	return strconv.ParseInt(firstLine(path), 10, 64)
}

func firstLine(path string) string {
	text, _ := os.ReadFile(path)
	line, _, _ := strings.Cut(string(text), "\n")
	return strings.TrimSpace(line)
}

// keyedValue is the number after `key` in a file of "key value" lines (cpu.stat, memory.stat, meminfo).
func keyedValue(path, key string) (int64, bool) {
	text, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(text), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == key {
			value, err := strconv.ParseInt(fields[1], 10, 64)
			return value, err == nil
		}
	}
	return 0, false
}

func valueOr(value int64, _ bool) int64 { return value }

// --- The route ---

// getMetrics answers the samples after `since` (epoch ms or RFC 3339; all kept when absent).
func (a *agent) getMetrics(w http.ResponseWriter, r *http.Request, _ []string) error {
	since, err := sinceParam(r.URL.Query().Get("since"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]interface{}{"data": a.metrics.since(since)})
}

func sinceParam(text string) (int64, error) {
	if text == "" {
		return 0, nil
	}
	if ms, err := strconv.ParseInt(text, 10, 64); err == nil && ms >= 0 {
		return ms, nil
	}
	if at, err := time.Parse(time.RFC3339Nano, text); err == nil {
		return at.UnixMilli(), nil
	}
	return 0, invalid("since must be epoch milliseconds or an RFC 3339 time")
}
