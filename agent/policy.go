// The machines' network policies (CONTRACT 20), as the resolver keeps them:
// which names a machine may resolve, and the firewall chain that holds the
// addresses it may reach. Pure logic: no sockets, no iptables (resolver.go
// and firewall.go do those), so it is tested as it is.
package main

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"time"
)

// netPolicy is a machine's policy as the service sends it (already checked
// there; checked again here, since a bad entry must never become a rule).
type netPolicy struct {
	Internet bool     `json:"internet"`
	Allow    []string `json:"allow"`
	Deny     []string `json:"deny"`
}

// compiledPolicy is a netPolicy split by kind of entry.
type compiledPolicy struct {
	internet  bool
	allowNets []*net.IPNet
	denyNets  []*net.IPNet
	// Lower case, no trailing dot; "*.example.org" stays as written.
	domains []string
}

// Longer than a connection usually lasts: an address the resolver answered
// stays reachable for this long after the last answer that named it (or the
// answer's TTL, when longer), since the firewall cuts connections that
// outlive it.
const minAddressHold = 15 * time.Minute

func compilePolicy(p netPolicy) (compiledPolicy, error) {
	c := compiledPolicy{internet: p.Internet}
	if len(p.Allow)+len(p.Deny) > 50 {
		return c, fmt.Errorf("at most 50 entries")
	}
	for _, entry := range p.Allow {
		if ipNet, err := parseCIDR(entry); err == nil {
			c.allowNets = append(c.allowNets, ipNet)
			continue
		}
		domain := strings.TrimSuffix(strings.ToLower(entry), ".")
		if !validDomain(strings.TrimPrefix(domain, "*.")) {
			return c, fmt.Errorf("allow entry %q is neither a CIDR nor a domain name", entry)
		}
		c.domains = append(c.domains, domain)
	}
	for _, entry := range p.Deny {
		ipNet, err := parseCIDR(entry)
		if err != nil {
			return c, fmt.Errorf("deny entry %q is not an IPv4 CIDR", entry)
		}
		c.denyNets = append(c.denyNets, ipNet)
	}
	return c, nil
}

// parseCIDR takes IPv4 CIDRs and bare addresses (a /32), nothing else.
func parseCIDR(entry string) (*net.IPNet, error) {
	if !strings.Contains(entry, "/") {
		entry += "/32"
	}
	ip, ipNet, err := net.ParseCIDR(entry)
	if err != nil || ip.To4() == nil {
		return nil, fmt.Errorf("not an IPv4 CIDR")
	}
	return ipNet, nil
}

func validDomain(name string) bool {
	if len(name) == 0 || len(name) > 253 || !strings.Contains(name, ".") {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// nameAllowed: with the internet open every name resolves; without, only the
// allowed domains (`*.x` is any name under x, not x itself).
func (c compiledPolicy) nameAllowed(name string) bool {
	if c.internet {
		return true
	}
	return c.domainAllowed(name)
}

// domainAllowed says whether the name is one of the allow list's domains,
// whose answered addresses the machine may then reach.
func (c compiledPolicy) domainAllowed(name string) bool {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for _, domain := range c.domains {
		if strings.HasPrefix(domain, "*.") {
			if strings.HasSuffix(name, domain[1:]) {
				return true
			}
		} else if name == domain {
			return true
		}
	}
	return false
}

// machineRules is what the firewall holds for one machine, in order: the
// denied ranges dropped, the allowed ranges and answered addresses
// accepted, then everything else accepted (internet) or dropped.
type machineRules struct {
	deny     []string
	accept   []string
	internet bool
}

// machineEntry is one machine the resolver knows, by its address.
type machineEntry struct {
	machine string
	policy  compiledPolicy
	// Address → until when the machine may reach it, from answers for allowed domains.
	answered map[string]time.Time
}

func (e *machineEntry) rules(now time.Time) machineRules {
	r := machineRules{internet: e.policy.internet}
	for _, n := range e.policy.denyNets {
		r.deny = append(r.deny, n.String())
	}
	for _, n := range e.policy.allowNets {
		r.accept = append(r.accept, n.String())
	}
	var answered []string
	for address, until := range e.answered {
		if until.After(now) {
			answered = append(answered, address+"/32")
		}
	}
	sort.Strings(answered)
	r.accept = append(r.accept, answered...)
	return r
}

// chainOf names a machine's chain by its IPv4 address (at most 28 characters).
func chainOf(address string) string {
	ip := net.ParseIP(address).To4()
	return fmt.Sprintf("MPM-%02x%02x%02x%02x", ip[0], ip[1], ip[2], ip[3])
}

// restoreInput is the iptables-restore text (applied with --noflush) that
// replaces one machine's chain and the dispatch chain at once: a change
// never shows half applied.
func restoreInput(dispatch string, addresses []string, address string, r machineRules) string {
	var b strings.Builder
	b.WriteString("*filter\n")
	chain := chainOf(address)
	fmt.Fprintf(&b, ":%s - [0:0]\n", chain)
	for _, cidr := range r.deny {
		fmt.Fprintf(&b, "-A %s -d %s -j DROP\n", chain, cidr)
	}
	for _, cidr := range r.accept {
		fmt.Fprintf(&b, "-A %s -d %s -j ACCEPT\n", chain, cidr)
	}
	if r.internet {
		fmt.Fprintf(&b, "-A %s -j ACCEPT\n", chain)
	} else {
		fmt.Fprintf(&b, "-A %s -j DROP\n", chain)
	}
	b.WriteString(dispatchRules(dispatch, addresses))
	b.WriteString("COMMIT\n")
	return b.String()
}

// dispatchRules sends each known machine's packets to its chain.
func dispatchRules(dispatch string, addresses []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, ":%s - [0:0]\n", dispatch)
	for _, a := range addresses {
		fmt.Fprintf(&b, "-A %s -s %s/32 -j %s\n", dispatch, a, chainOf(a))
	}
	return b.String()
}
