//! Who the client is, as far as its address goes. Behind a TLS proxy every connection comes
//! from the proxy; the proxy says who it forwards for in `Forwarded` (RFC 7239) or
//! `X-Forwarded-For`. Those headers are believed only from the proxies the operator names
//! (`PRACTICE_TRUSTED_PROXIES`): anyone else could write them. Of the two, only the one the
//! operator says the proxies write (`PRACTICE_FORWARDED_HEADER`) is read: a proxy that appends
//! to `X-Forwarded-For` passes a client's own `Forwarded` on untouched, and the other way
//! round, so a client could otherwise name a new address on every request. The address every limit counts
//! by groups IPv6 by /64, the block one subscriber gets, so that an attacker cannot take a
//! fresh address per guess.

use std::net::{IpAddr, Ipv6Addr};
use std::str::FromStr;

use axum::http::HeaderMap;
use ipnet::IpNet;

use crate::config::{ForwardedHeader, TrustedProxies};

/// Who a request's client is, given the proxies whose forwarding headers are believed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientAddresses {
    proxies: Vec<IpNet>,
    header: ForwardedHeader,
}

impl ClientAddresses {
    pub fn new(proxies: &TrustedProxies, header: ForwardedHeader) -> ClientAddresses {
        ClientAddresses {
            proxies: proxies.0.clone(),
            header,
        }
    }

    /// True for a trusted proxy.
    pub fn is_proxy(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        self.proxies.iter().any(|net| net.contains(&address))
    }

    /// The client of a request that came from `peer`: the peer itself, unless it is a trusted
    /// proxy; then the nearest address its forwarding header names that is not a trusted proxy
    /// itself. Grouped as every limit counts it (see [`group`]).
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = canonical(peer);
        if self.is_proxy(client) {
            // From the nearest hop outwards: the first that no trusted proxy stands at.
            for hop in forwarded_for(headers, self.header).into_iter().rev() {
                let Some(hop) = hop else {
                    // A hop that cannot be read: believe nothing beyond it.
                    break;
                };
                client = canonical(hop);
                if !self.is_proxy(client) {
                    break;
                }
            }
        }
        group(client)
    }
}

/// An IPv4 address written as IPv6 (`::ffff:10.0.0.1`) is the IPv4 address.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

/// The address a limit counts by: IPv4 as it is, IPv6 by its /64.
pub fn group(address: IpAddr) -> IpAddr {
    match canonical(address) {
        IpAddr::V6(v6) => {
            let segments = v6.segments();
            IpAddr::V6(Ipv6Addr::new(
                segments[0],
                segments[1],
                segments[2],
                segments[3],
                0,
                0,
                0,
                0,
            ))
        }
        v4 => v4,
    }
}

/// The addresses a request was forwarded for, from the client outwards; None for a hop that
/// cannot be read (`unknown`, an obfuscated name, garbage), in the header the proxies write.
fn forwarded_for(headers: &HeaderMap, header: ForwardedHeader) -> Vec<Option<IpAddr>> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap_or("\u{0}").to_string())
            .collect()
    };
    if header == ForwardedHeader::Forwarded {
        return values("forwarded")
            .iter()
            .flat_map(|value| value.split(','))
            .map(|element| {
                element
                    .split(';')
                    .filter_map(|pair| pair.split_once('='))
                    .find(|(key, _)| key.trim().eq_ignore_ascii_case("for"))
                    .and_then(|(_, node)| node_address(node))
            })
            .collect();
    }
    values("x-forwarded-for")
        .iter()
        .flat_map(|value| value.split(','))
        .map(node_address)
        .collect()
}

/// The address of a node as `Forwarded` or `X-Forwarded-For` write it: `192.0.2.1`,
/// `192.0.2.1:4711`, `"[2001:db8::1]:4711"`, `2001:db8::1`.
fn node_address(node: &str) -> Option<IpAddr> {
    let node = node.trim().trim_matches('"');
    if let Ok(address) = IpAddr::from_str(node) {
        return Some(address);
    }
    if let Some(rest) = node.strip_prefix('[') {
        let (address, _) = rest.split_once(']')?;
        return IpAddr::from_str(address).ok();
    }
    let (address, port) = node.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    IpAddr::from_str(address).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("value"));
        }
        map
    }

    #[test]
    fn believes_forwarding_headers_only_from_trusted_proxies() {
        let trusted = crate::config::parse_proxies("10.0.0.0/8, 192.0.2.1").expect("parses");
        let proxies = ClientAddresses::new(&trusted, ForwardedHeader::XForwardedFor);
        let forwarded = headers(&[("x-forwarded-for", "203.0.113.7, 10.1.1.1")]);
        assert_eq!(
            proxies.client(ip("10.0.0.5"), &forwarded),
            ip("203.0.113.7")
        );
        assert_eq!(
            proxies.client(ip("198.51.100.9"), &forwarded),
            ip("198.51.100.9"),
            "not a proxy: its header is ignored"
        );
        let spoofed = headers(&[("x-forwarded-for", "1.2.3.4, 203.0.113.7")]);
        assert_eq!(
            proxies.client(ip("192.0.2.1"), &spoofed),
            ip("203.0.113.7"),
            "what the client itself wrote is not believed"
        );
        let unreadable = headers(&[("x-forwarded-for", "unknown, 10.1.1.1")]);
        assert_eq!(proxies.client(ip("10.0.0.5"), &unreadable), ip("10.1.1.1"));
    }

    #[test]
    fn reads_only_the_header_the_proxies_write() {
        let trusted = crate::config::parse_proxies("10.0.0.0/8").expect("parses");
        let rfc = headers(&[(
            "forwarded",
            "for=\"[2001:db8:cafe::17]:4711\";proto=https, for=10.2.2.2",
        )]);
        let by_rfc = ClientAddresses::new(&trusted, ForwardedHeader::Forwarded);
        assert_eq!(by_rfc.client(ip("10.0.0.5"), &rfc), ip("2001:db8:cafe::"));
        // A client's own header of the other kind, passed on by a proxy that appends to its
        // own: not read, so the client cannot name a new address on each request.
        let both = headers(&[
            ("forwarded", "for=198.51.100.1"),
            ("x-forwarded-for", "203.0.113.7"),
        ]);
        let by_xff = ClientAddresses::new(&trusted, ForwardedHeader::XForwardedFor);
        assert_eq!(by_xff.client(ip("10.0.0.5"), &both), ip("203.0.113.7"));
        assert_eq!(by_xff.client(ip("10.0.0.5"), &rfc), ip("10.0.0.5"));
        let both = headers(&[
            ("forwarded", "for=203.0.113.7"),
            ("x-forwarded-for", "198.51.100.1"),
        ]);
        assert_eq!(by_rfc.client(ip("10.0.0.5"), &both), ip("203.0.113.7"));
    }

    #[test]
    fn groups_ipv6_by_64() {
        assert_eq!(group(ip("2001:db8:1:2:3:4:5:6")), ip("2001:db8:1:2::"));
        assert_eq!(group(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
        assert_eq!(group(ip("192.0.2.1")), ip("192.0.2.1"));
    }
}
