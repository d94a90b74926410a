//! Sandbox networking (netns, veth, NAT, nftables egress).
