package main

import (
	"bufio"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// recordingFirewall keeps what would have been applied.
type recordingFirewall struct {
	mu      sync.Mutex
	applied []string
	removed []string
	fail    error
}

func (f *recordingFirewall) apply(input string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.applied = append(f.applied, input)
	return nil
}

func (f *recordingFirewall) removeChain(chain string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, chain)
	return nil
}

func (f *recordingFirewall) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.applied) == 0 {
		return ""
	}
	return f.applied[len(f.applied)-1]
}

func query(t *testing.T, name string, qtype dnsmessage.Type) []byte {
	t.Helper()
	m := dnsmessage.Message{Header: dnsmessage.Header{ID: 7, RecursionDesired: true}, Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: qtype, Class: dnsmessage.ClassINET}}}
	out, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// upstreamAnswering answers every A question with these addresses (TTL 60), counting the questions.
func upstreamAnswering(addresses ...string) (func([]byte) ([]byte, error), *[]string) {
	var asked []string
	return func(q []byte) ([]byte, error) {
		var m dnsmessage.Message
		if err := m.Unpack(q); err != nil {
			return nil, err
		}
		asked = append(asked, m.Questions[0].Name.String())
		m.Header.Response = true
		for _, a := range addresses {
			ip := net.ParseIP(a).To4()
			m.Answers = append(m.Answers, dnsmessage.Resource{
				Header: dnsmessage.ResourceHeader{Name: m.Questions[0].Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
				Body:   &dnsmessage.AResource{A: [4]byte{ip[0], ip[1], ip[2], ip[3]}},
			})
		}
		return m.Pack()
	}, &asked
}

func rcodeOf(t *testing.T, answer []byte) dnsmessage.RCode {
	t.Helper()
	var m dnsmessage.Message
	if err := m.Unpack(answer); err != nil {
		t.Fatal(err)
	}
	return m.Header.RCode
}

const machineAddress = "172.30.0.5"

func setPolicy(t *testing.T, r *resolver, p netPolicy) {
	t.Helper()
	if err := r.setPolicy(policyRequest{Op: "set", Address: machineAddress, Machine: "mch_1", Policy: &p}); err != nil {
		t.Fatal(err)
	}
}

func TestAllowListOfOneDomainResolvesItAndAllowsItsAddressesBeforeAnswering(t *testing.T) {
	fw := &recordingFirewall{}
	r := newResolver(fw, nil, "", true)
	setPolicy(t, r, netPolicy{Internet: false, Allow: []string{"pypi.example.test"}})
	if !strings.Contains(fw.last(), "-A MPM-ac1e0005 -j DROP") || strings.Contains(fw.last(), "203.0.113.7") {
		t.Fatalf("the chain before any answer:\n%s", fw.last())
	}
	exchange, asked := upstreamAnswering("203.0.113.7")
	answer := r.answerQuery(machineAddress, query(t, "pypi.example.test.", dnsmessage.TypeA), exchange)
	if rcodeOf(t, answer) != dnsmessage.RCodeSuccess {
		t.Fatalf("rcode %v", rcodeOf(t, answer))
	}
	want := "-A MPM-ac1e0005 -d 203.0.113.7/32 -j ACCEPT\n-A MPM-ac1e0005 -j DROP\n"
	if !strings.Contains(fw.last(), want) || !strings.Contains(fw.last(), "-A MP-MACHINES -s 172.30.0.5/32 -j MPM-ac1e0005") {
		t.Fatalf("the chain after the answer:\n%s", fw.last())
	}
	// Another name: refused, never asked upstream, no rule.
	applied := len(fw.applied)
	other := r.answerQuery(machineAddress, query(t, "other.example.test.", dnsmessage.TypeA), exchange)
	if rcodeOf(t, other) != dnsmessage.RCodeRefused {
		t.Fatalf("another name: rcode %v", rcodeOf(t, other))
	}
	if len(*asked) != 1 || len(fw.applied) != applied {
		t.Fatalf("asked upstream %v, applied %d times", *asked, len(fw.applied)-applied)
	}
}

func TestWildcardsMatchSubdomainsOnly(t *testing.T) {
	c, err := compilePolicy(netPolicy{Allow: []string{"*.PyPI.org."}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"files.pypi.org": true, "a.b.pypi.org.": true, "pypi.org": false, "evilpypi.org": false, "pypi.org.evil.test": false} {
		if c.nameAllowed(name) != want {
			t.Errorf("%s: %v", name, !want)
		}
	}
}

func TestInternetOnResolvesEverythingAndDeniesRanges(t *testing.T) {
	fw := &recordingFirewall{}
	r := newResolver(fw, nil, "", true)
	setPolicy(t, r, netPolicy{Internet: true, Deny: []string{"203.0.113.0/24", "198.51.100.9"}})
	want := "-A MPM-ac1e0005 -d 203.0.113.0/24 -j DROP\n-A MPM-ac1e0005 -d 198.51.100.9/32 -j DROP\n-A MPM-ac1e0005 -j ACCEPT\n"
	if !strings.Contains(fw.last(), want) {
		t.Fatalf("chain:\n%s", fw.last())
	}
	exchange, _ := upstreamAnswering("203.0.113.7")
	applied := len(fw.applied)
	if rcodeOf(t, r.answerQuery(machineAddress, query(t, "anything.example.test.", dnsmessage.TypeA), exchange)) != dnsmessage.RCodeSuccess {
		t.Fatal("refused with the internet open")
	}
	if len(fw.applied) != applied {
		t.Fatal("answers add no rule when everything is open")
	}
}

func TestChangingThePolicyReplacesTheChainAndForgetsTheAnsweredAddresses(t *testing.T) {
	fw := &recordingFirewall{}
	r := newResolver(fw, nil, "", true)
	setPolicy(t, r, netPolicy{Allow: []string{"a.example.test"}})
	exchange, _ := upstreamAnswering("203.0.113.7")
	r.answerQuery(machineAddress, query(t, "a.example.test.", dnsmessage.TypeA), exchange)
	setPolicy(t, r, netPolicy{Allow: []string{"b.example.test"}})
	if strings.Contains(fw.last(), "203.0.113.7") {
		t.Fatalf("a.example.test's address outlived the policy that allowed it:\n%s", fw.last())
	}
	if rcodeOf(t, r.answerQuery(machineAddress, query(t, "a.example.test.", dnsmessage.TypeA), exchange)) != dnsmessage.RCodeRefused {
		t.Fatal("a.example.test still resolves")
	}
}

func TestAnsweredAddressesExpire(t *testing.T) {
	fw := &recordingFirewall{}
	r := newResolver(fw, nil, "", true)
	clock := time.Unix(1_000_000, 0)
	r.now = func() time.Time { return clock }
	setPolicy(t, r, netPolicy{Allow: []string{"a.example.test"}})
	exchange, _ := upstreamAnswering("203.0.113.7")
	r.answerQuery(machineAddress, query(t, "a.example.test.", dnsmessage.TypeA), exchange)
	clock = clock.Add(minAddressHold - time.Second)
	r.prune()
	if !strings.Contains(fw.last(), "203.0.113.7") {
		t.Fatal("gone before its hold")
	}
	clock = clock.Add(2 * time.Second)
	r.prune()
	if strings.Contains(fw.last(), "203.0.113.7") {
		t.Fatal("still there after its hold")
	}
}

func TestBadEntriesChangeNothing(t *testing.T) {
	fw := &recordingFirewall{}
	r := newResolver(fw, nil, "", true)
	setPolicy(t, r, netPolicy{Internet: true})
	before := len(fw.applied)
	for _, p := range []netPolicy{{Allow: []string{"not a domain"}}, {Deny: []string{"example.org"}}, {Allow: []string{"2001:db8::/32"}}, {Allow: make([]string, 51)}} {
		if err := r.setPolicy(policyRequest{Op: "set", Address: machineAddress, Policy: &p}); err == nil {
			t.Errorf("%v accepted", p)
		}
	}
	if len(fw.applied) != before || !r.machines[machineAddress].policy.internet {
		t.Fatal("a refused policy changed something")
	}
}

func TestAFailedFirewallKeepsThePreviousPolicy(t *testing.T) {
	fw := &recordingFirewall{}
	r := newResolver(fw, nil, "", true)
	setPolicy(t, r, netPolicy{Internet: true})
	fw.fail = fmt.Errorf("no iptables")
	if err := r.setPolicy(policyRequest{Op: "set", Address: machineAddress, Policy: &netPolicy{}}); err == nil {
		t.Fatal("no error")
	}
	if !r.machines[machineAddress].policy.internet {
		t.Fatal("the policy changed though its rules were not applied")
	}
}

func TestLocalNamesAndPrivateReverseLookupsNeverLeave(t *testing.T) {
	r := newResolver(&recordingFirewall{}, nil, "", true)
	exchange, asked := upstreamAnswering()
	for _, q := range []struct {
		name  string
		qtype dnsmessage.Type
	}{{"mch-x1y2.", dnsmessage.TypeA}, {"5.0.30.172.in-addr.arpa.", dnsmessage.TypePTR}, {"1.1.168.192.in-addr.arpa.", dnsmessage.TypePTR}, {"1.0.0.10.in-addr.arpa.", dnsmessage.TypePTR}} {
		if rcodeOf(t, r.answerQuery("172.30.0.9", query(t, q.name, q.qtype), exchange)) != dnsmessage.RCodeNameError {
			t.Errorf("%s answered", q.name)
		}
	}
	r.answerQuery("172.30.0.9", query(t, "7.113.0.203.in-addr.arpa.", dnsmessage.TypePTR), exchange)
	if len(*asked) != 1 {
		t.Fatalf("asked upstream: %v", *asked)
	}
}

func TestMachinesWithNoPolicyFollowTheDefault(t *testing.T) {
	exchange, _ := upstreamAnswering("203.0.113.7")
	open := newResolver(&recordingFirewall{}, nil, "", true)
	if rcodeOf(t, open.answerQuery("172.30.0.9", query(t, "a.example.test.", dnsmessage.TypeA), exchange)) != dnsmessage.RCodeSuccess {
		t.Fatal("default open refused")
	}
	closed := newResolver(&recordingFirewall{}, nil, "", false)
	if rcodeOf(t, closed.answerQuery("172.30.0.9", query(t, "a.example.test.", dnsmessage.TypeA), exchange)) != dnsmessage.RCodeRefused {
		t.Fatal("default closed answered")
	}
}

func TestForgetRemovesTheMachine(t *testing.T) {
	fw := &recordingFirewall{}
	r := newResolver(fw, nil, "", true)
	setPolicy(t, r, netPolicy{})
	if err := r.setPolicy(policyRequest{Op: "forget", Address: machineAddress}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fw.last(), machineAddress) || len(fw.removed) != 1 || fw.removed[0] != "MPM-ac1e0005" {
		t.Fatalf("applied %q, removed %v", fw.last(), fw.removed)
	}
}

func TestPoliciesAreKeptAcrossRestarts(t *testing.T) {
	state := filepath.Join(t.TempDir(), "policies.json")
	first := newResolver(&recordingFirewall{}, nil, state, true)
	setPolicy(t, first, netPolicy{Allow: []string{"a.example.test"}})
	fw := &recordingFirewall{}
	second := newResolver(fw, nil, state, true)
	second.loadState()
	if second.machines[machineAddress] == nil || !strings.Contains(fw.last(), "MPM-ac1e0005 -j DROP") {
		t.Fatal("the policy was not kept")
	}
}

// Over real sockets: a machine's question over UDP, forwarded to a real upstream over UDP; the control socket sets the policy.
func TestOverSockets(t *testing.T) {
	upstream, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer upstream.Close()
	exchange, _ := upstreamAnswering("203.0.113.7")
	go func() {
		buf := make([]byte, 512)
		for {
			n, peer, err := upstream.ReadFrom(buf)
			if err != nil {
				return
			}
			answer, _ := exchange(buf[:n])
			upstream.WriteTo(answer, peer)
		}
	}()
	fw := &recordingFirewall{}
	r := newResolver(fw, []string{upstream.LocalAddr().String()}, "", true)
	listener, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	go r.serveUDP(listener)
	socket := filepath.Join(t.TempDir(), "resolver.sock")
	control, err := listenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()
	go r.serveControl(control)

	conn, _ := net.Dial("unix", socket)
	fmt.Fprintln(conn, `{"op":"set","address":"127.0.0.1","machine":"mch_1","policy":{"internet":false,"allow":["a.example.test"]}}`)
	line, _ := bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	if line != "ok\n" {
		t.Fatalf("control answered %q", line)
	}
	if code := resolverPolicyCommand([]string{"--socket", socket, `{"op":"set","address":"127.0.0.1","policy":{"internet":false,"allow":["not a name"]}}`}); code != 1 {
		t.Fatalf("a bad policy: exit %d", code)
	}

	ask := func(name string) dnsmessage.RCode {
		c, err := net.Dial("udp4", listener.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(query(t, name, dnsmessage.TypeA))
		buf := make([]byte, 512)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return rcodeOf(t, buf[:n])
	}
	if code := ask("a.example.test."); code != dnsmessage.RCodeSuccess {
		t.Fatalf("allowed name: %v", code)
	}
	if !strings.Contains(fw.last(), "-A MPM-7f000001 -d 203.0.113.7/32 -j ACCEPT") {
		t.Fatalf("chain:\n%s", fw.last())
	}
	if code := ask("b.example.test."); code != dnsmessage.RCodeRefused {
		t.Fatalf("another name: %v", code)
	}
}
