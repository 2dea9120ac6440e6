package egress

import (
	"net/netip"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		// Public addresses are dialable.
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"2606:4700::1111", ""},
		{"2a00:1450:4001:82a::200e", ""},

		{"127.0.0.1", ReasonLoopback},
		{"127.255.255.254", ReasonLoopback},
		{"::1", ReasonLoopback},
		{"10.1.2.3", ReasonPrivate},
		{"172.16.0.1", ReasonPrivate},
		{"172.31.255.255", ReasonPrivate},
		{"172.32.0.1", ""},
		{"192.168.1.1", ReasonPrivate},
		{"100.64.0.1", ReasonCGNAT},
		{"100.100.100.200", ReasonCGNAT}, // Alibaba metadata
		{"169.254.169.254", ReasonCloudMetadata},
		{"168.63.129.16", ReasonCloudMetadata},
		{"fd00:ec2::254", ReasonCloudMetadata},
		{"169.254.1.1", ReasonLinkLocal},
		{"fe80::1", ReasonLinkLocal},
		{"fe80::1%eth0", ReasonLinkLocal},
		{"fec0::1", ReasonSiteLocal},
		{"fd12:3456::1", ReasonUniqueLocal},
		{"fc00::1", ReasonUniqueLocal},
		{"0.0.0.0", ReasonUnspecified},
		{"::", ReasonUnspecified},
		{"0.1.2.3", ReasonReserved},
		{"224.0.0.1", ReasonMulticast},
		{"239.255.255.250", ReasonMulticast},
		{"ff02::1", ReasonMulticast},
		{"255.255.255.255", ReasonBroadcast},
		{"240.0.0.1", ReasonReserved},
		{"192.0.0.8", ReasonReserved},
		{"198.18.0.1", ReasonReserved},
		{"100::1", ReasonReserved},    // discard-only
		{"4000::1", ReasonReserved},   // outside 2000::/3
		{"2001:2::1", ReasonReserved}, // benchmarking

		// Documentation ranges are left dialable (see v4Rules).
		{"192.0.2.1", ""},
		{"203.0.113.7", ""},
		{"2001:db8::1", ""},

		// IPv4-mapped.
		{"::ffff:127.0.0.1", ReasonLoopback},
		{"::ffff:10.0.0.1", ReasonPrivate},
		{"::ffff:169.254.169.254", ReasonCloudMetadata},
		{"::ffff:8.8.8.8", ""},
		// IPv4-compatible (deprecated).
		{"::127.0.0.1", ReasonLoopback},
		{"::10.0.0.1", ReasonPrivate},
		{"::8.8.8.8", ReasonReserved},
		// NAT64 well-known prefix.
		{"64:ff9b::a01:203", ReasonPrivate}, // 10.1.2.3
		{"64:ff9b::7f00:1", ReasonLoopback},
		{"64:ff9b::a9fe:a9fe", ReasonCloudMetadata},
		{"64:ff9b::808:808", ""},
		{"64:ff9b:1::a01:203", ReasonNAT64Local},
		// 6to4.
		{"2002:a01:203::", ReasonPrivate},
		{"2002:7f00:1::1", ReasonLoopback},
		{"2002:808:808::1", ""},
		// Teredo: client address is the inverse of the last 32 bits.
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", ReasonLoopback}, // ^7f000001
		{"2001:0:4136:e378:8000:63bf:f5fe:fefc", ReasonPrivate},  // ^0a010103
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", ""},             // ^08080808

		{"invalid", ReasonReserved}, // the zero Addr
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			var a netip.Addr
			if tt.addr != "invalid" {
				a = netip.MustParseAddr(tt.addr)
			}
			if got := Classify(a); got != tt.want {
				t.Errorf("Classify(%s) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}
