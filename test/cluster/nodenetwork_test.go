package cluster

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestSlotsInNamesTheNodeLinksOnly(t *testing.T) {
	out := `1: lo    inet 127.0.0.1/8 scope host lo\       valid_lft forever preferred_lft forever
1: lo    inet 10.200.0.1/32 scope global lo\       valid_lft forever preferred_lft forever
2: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\       valid_lft forever preferred_lft forever
7: krv1a2b3c4d    inet 10.200.1.1/30 scope global krv1a2b3c4d\       valid_lft forever preferred_lft forever
9: krv5e6f7a8b    inet 10.200.3.1/30 scope global krv5e6f7a8b\       valid_lft forever preferred_lft forever
11: other    inet 10.201.4.1/24 scope global other\       valid_lft forever preferred_lft forever`
	if got, want := slotsIn(out), map[int]bool{1: true, 3: true}; !reflect.DeepEqual(got, want) {
		t.Errorf("slotsIn = %v, want %v", got, want)
	}
}

// A node in its own namespace gets its slot's pod CIDR and routes to the
// cluster's ranges only; a node in the host's network keeps the bridge that
// routes nowhere.
func TestCNIConfigOfANodeFollowsItsNetwork(t *testing.T) {
	type ipam struct {
		Ranges [][]struct{ Subnet string } `json:"ranges"`
		Routes []struct{ Dst string }      `json:"routes"`
	}
	type conf struct {
		Plugins []struct {
			Type      string `json:"type"`
			IsGateway bool   `json:"isGateway"`
			IPMasq    bool   `json:"ipMasq"`
			IPAM      ipam   `json:"ipam"`
		} `json:"plugins"`
	}
	for _, tc := range []struct {
		name     string
		netns    bool
		subnet   string
		gateway  bool
		routesTo []string
	}{
		{name: "host network", subnet: "10.244.0.0/16"},
		{name: "own namespace, slot 7", netns: true, subnet: "10.201.7.0/24", gateway: true,
			routesTo: []string{NodeLinkRange, ClusterCIDR, ServiceCIDR}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &RealNode{Dir: "/tmp/x/node-a", id: "1a2b3c4d", bridge: "krbr1a2b3c4d",
				spec: RealNodeSpec{NetworkNamespace: tc.netns}}
			if tc.netns {
				n.net = netForSlot(7)
			}
			var c conf
			if err := json.Unmarshal(n.cniConfig(), &c); err != nil {
				t.Fatal(err)
			}
			b := c.Plugins[0]
			if b.Type != "bridge" || b.IPMasq || b.IsGateway != tc.gateway {
				t.Errorf("bridge %+v, want isGateway %v and no masquerading", b, tc.gateway)
			}
			if len(b.IPAM.Ranges) != 1 || b.IPAM.Ranges[0][0].Subnet != tc.subnet {
				t.Errorf("ranges %+v, want %s", b.IPAM.Ranges, tc.subnet)
			}
			var dsts []string
			for _, r := range b.IPAM.Routes {
				dsts = append(dsts, r.Dst)
			}
			if !reflect.DeepEqual(dsts, tc.routesTo) {
				t.Errorf("routes to %v, want %v (never a default route)", dsts, tc.routesTo)
			}
		})
	}
}
