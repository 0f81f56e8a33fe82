//! Where a webhook may go. A receiver must be on the public internet, over `https`, unless the
//! operator allows plain `http` and private, loopback and link-local addresses
//! (`PRACTICE_WEBHOOK_ALLOW_PRIVATE`, for a clinic's own network and for tests): otherwise a
//! subscription could make the server call the services beside it.
//!
//! The rule is checked twice: on the URL when a subscription is made or changed, and on every
//! address the name resolves to when a delivery connects ([`PublicOnly`], the resolver of the
//! client that delivers). The second check is on the very addresses the connection uses, so a
//! DNS answer that changes between the first check and the connection changes nothing.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Longest URL a subscription may have.
pub const MAX_URL_CHARS: usize = 2048;

/// Checks a receiver's URL: `https` (or `http` when private addresses are allowed), a host, no
/// credentials, and an address literal only if it is a public one (or private ones are
/// allowed).
pub fn check_url(text: &str, allow_private: bool) -> Result<Url, String> {
    if text.chars().count() > MAX_URL_CHARS {
        return Err(format!("url must be at most {MAX_URL_CHARS} characters"));
    }
    let url = Url::parse(text).map_err(|e| format!("url is not a URL ({e}): {text:?}"))?;
    // What is kept and sent is the URL written out, where each character outside ASCII is
    // percent-encoded: up to 12 characters for one.
    if url.as_str().len() > MAX_URL_CHARS {
        return Err(format!(
            "url must be at most {MAX_URL_CHARS} characters once percent-encoded"
        ));
    }
    match url.scheme() {
        "https" => {}
        "http" if allow_private => {}
        "http" => {
            return Err(
                "url must use https (plain http is allowed only when the server's operator \
                 sets PRACTICE_WEBHOOK_ALLOW_PRIVATE)"
                    .into(),
            );
        }
        other => return Err(format!("url must use https, not {other}")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("url must not carry credentials: send them in headers instead".into());
    }
    let public = match url.host() {
        None => return Err("url must name a host".into()),
        Some(url::Host::Ipv4(ip)) => is_public(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => is_public(IpAddr::V6(ip)),
        Some(url::Host::Domain(name)) => !is_local_name(name),
    };
    if !public && !allow_private {
        return Err(
            "url must be on a public address: private, loopback and link-local addresses are \
             allowed only when the server's operator sets PRACTICE_WEBHOOK_ALLOW_PRIVATE"
                .into(),
        );
    }
    Ok(url)
}

/// Checks a new receiver's URL, for a subscription made or changed: the rules of
/// [`check_url`], no port 0 (nothing is reached there) and no fragment (a request never sends
/// it); the URL in the one spelling kept for every equivalent one (see [`canonical`]). URLs
/// kept before these rules are sent as they are.
pub fn check_new_url(text: &str, allow_private: bool) -> Result<Url, String> {
    let url = check_url(text, allow_private)?;
    if url.fragment().is_some() {
        return Err("url must not carry a fragment (#...): a request never sends it".into());
    }
    if url.port() == Some(0) {
        return Err("url must not use port 0: nothing can be reached there".into());
    }
    Ok(canonical(url))
}

/// The URL in the one spelling kept for every equivalent one, so that the rule of one live
/// subscription per URL and event type cannot be passed by writing the same URL another way.
/// The parser has already lowercased the host, taken out the default port and resolved `.`
/// and `..`; here a domain's final dot goes (DNS names the same host with or without it), and,
/// in the path and query, a percent-encoded unreserved character is written as itself and any
/// other percent-encoding in capitals (RFC 3986, 6.2.2.1 and 6.2.2.2).
fn canonical(mut url: Url) -> Url {
    let bare = match url.host() {
        Some(url::Host::Domain(name)) if name.ends_with('.') => {
            Some(name.trim_end_matches('.').to_string())
        }
        _ => None,
    };
    if let Some(bare) = bare.filter(|b| !b.is_empty()) {
        // A domain the parser took stays one without its dots; should it not, the URL is kept
        // as written.
        let _ = url.set_host(Some(&bare));
    }
    let path = decode_unreserved(url.path());
    url.set_path(&path);
    if let Some(query) = url.query().map(decode_unreserved) {
        url.set_query(Some(&query));
    }
    url
}

/// `text` with each `%XX` of an unreserved character (letters, digits, `-`, `.`, `_`, `~`)
/// written as the character, and each other `%xx` in capitals.
fn decode_unreserved(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes.get(i..i + 3) {
            Some([b'%', high, low]) => hex(*high).zip(hex(*low)).map(|(h, l)| h * 16 + l),
            _ => None,
        };
        match escaped {
            Some(byte) if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) => {
                out.push(char::from(byte));
                i += 3;
            }
            Some(byte) => {
                out.push_str(&format!("%{byte:02X}"));
                i += 3;
            }
            None => {
                // Not an escape: the parser leaves only ASCII here, so each byte is a char.
                out.push(char::from(bytes[i]));
                i += 1;
            }
        }
    }
    out
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// Names that mean this machine whatever DNS says.
fn is_local_name(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// True for an address on the public internet: not private, loopback, link-local, shared
/// (carrier-grade NAT), unspecified, broadcast, multicast, documentation or reserved, and not
/// an IPv6 address that embeds such an IPv4 one.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => is_public_v4(ip),
        IpAddr::V6(ip) => is_public_v6(ip),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space, RFC 6598
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
        || (first & 0xffc0) == 0xfec0 // site-local, deprecated
        || first == 0x2001 && ip.segments()[1] == 0x0db8 // documentation
        || first == 0x0064 && ip.segments()[1] == 0xff9b // NAT64, embeds IPv4
        || first == 0x2002 // 6to4, embeds IPv4
        || ip.segments()[..6] == [0, 0, 0, 0, 0, 0]) // IPv4-compatible, deprecated
}

/// The resolver of the delivering client: resolves as the system does, then keeps only the
/// addresses a webhook may go to. A name with none left fails to resolve, and the attempt
/// fails with that reason.
#[derive(Clone, Copy, Debug)]
pub struct PublicOnly {
    pub allow_private: bool,
}

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_string();
        let resolving: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin(async move {
            if is_local_name(&host) && !allow_private {
                return Err(refused(&host));
            }
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|address| allow_private || is_public(address.ip()))
                .collect();
            if found.is_empty() {
                return Err(refused(&host));
            }
            let addresses: Addrs = Box::new(found.into_iter());
            Ok(addresses)
        });
        resolving
    }
}

fn refused(host: &str) -> Box<dyn std::error::Error + Send + Sync> {
    format!("{host} has no public address: webhooks go to public addresses only").into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2002:a00:1::",
        ] {
            let ip: IpAddr = private.parse().expect(private);
            assert!(!is_public(ip), "{private}");
        }
        for public in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            let ip: IpAddr = public.parse().expect(public);
            assert!(is_public(ip), "{public}");
        }
    }

    #[test]
    fn urls_are_checked() {
        assert!(check_url("https://hooks.example.com/in", false).is_ok());
        for bad in [
            "http://hooks.example.com/in",
            "ftp://hooks.example.com/",
            "https://127.0.0.1/in",
            "https://[::1]/in",
            "https://localhost:8443/",
            "https://169.254.169.254/latest/meta-data",
            "https://user:pw@hooks.example.com/",
            "not a url",
        ] {
            assert!(check_url(bad, false).is_err(), "{bad}");
        }
        assert!(check_url("http://127.0.0.1:9000/in", true).is_ok());
        assert!(check_url("ftp://127.0.0.1/", true).is_err());
        // The bound is on the URL as kept, percent-encoded: 2,020 characters of which 2,000
        // are emoji are 24,020 written out.
        let long = format!("https://example.com/{}", "\u{1F600}".repeat(2000));
        assert!(long.chars().count() <= MAX_URL_CHARS);
        let refused = check_url(&long, false).expect_err("too long once encoded");
        assert!(refused.contains("percent-encoded"), "{refused}");
        let fits = format!("https://example.com/{}", "\u{1F600}".repeat(150));
        assert!(check_url(&fits, false).is_ok());
        for bad in [
            "https://hooks.example.com:0/in",
            "https://hooks.example.com/in#part",
        ] {
            assert!(check_new_url(bad, false).is_err(), "{bad}");
            // Kept from before these rules, such a URL is still sent to.
            assert!(check_url(bad, false).is_ok(), "{bad}");
        }
    }

    #[test]
    fn equivalent_urls_are_kept_in_one_spelling() {
        let kept = |text: &str| check_new_url(text, false).expect(text).to_string();
        let one = "https://hooks.example.com/in/a~b?x=1&y=%2F";
        for same in [
            "https://hooks.example.com/in/a~b?x=1&y=%2F",
            "https://hooks.example.com./in/a~b?x=1&y=%2F",
            "HTTPS://Hooks.Example.COM:443/in/./a%7eb?x=%31&y=%2f",
            "https://hooks.example.com/in/%61%7Eb?%78=1&y=%2F",
        ] {
            assert_eq!(kept(same), one, "{same}");
        }
        // What differs stays different: another path, an encoded reserved character.
        assert_ne!(
            kept("https://hooks.example.com/in/a%2Fb"),
            kept("https://hooks.example.com/in/a/b")
        );
        assert_eq!(
            kept("https://hooks.example.com/%E2%82%AC"),
            "https://hooks.example.com/%E2%82%AC"
        );
        assert_eq!(
            kept("https://hooks.example.com/%zz%4"),
            "https://hooks.example.com/%zz%4"
        );
    }
}
