//! `tickwire healthcheck` and `tickwire drain`: what a container needs from its own server
//! without curl in the image. `healthcheck` is one plain-HTTP GET of a health probe (a
//! `HEALTHCHECK`; healthy is a 200 within the timeout); `drain` asks the server to drain
//! and waits until it has exited (a Kubernetes `preStop` hook).

use std::io::{Read as _, Write as _};
use std::net::{TcpStream, ToSocketAddrs as _};
use std::time::Duration;

use anyhow::Context as _;

/// GETs `url` (`http://host:port/path`); `Ok` when it answers 200 within `timeout`.
pub fn probe(url: &str, timeout: Duration) -> anyhow::Result<()> {
    let status = request(url, "GET", "", timeout)?;
    anyhow::ensure!(status == "200", "{url} answered {status:?}");
    Ok(())
}

/// POSTs `/api/admin/drain` to the server at `base` (`http://host:port`) with the admin
/// `token`, then waits up to `wait` for the server to finish (its port closes). `Ok` once it
/// has, or when the wait is over (the caller's shutdown takes it from there).
pub fn drain(base: &str, token: &str, wait: Duration) -> anyhow::Result<()> {
    let base = base.trim_end_matches('/');
    let status = request(
        &format!("{base}/api/admin/drain"),
        "POST",
        &format!("Authorization: Bearer {token}\r\nContent-Length: 0\r\n"),
        Duration::from_secs(5),
    )?;
    anyhow::ensure!(status == "200", "drain answered {status:?}");
    let start = std::time::Instant::now();
    while start.elapsed() < wait {
        if request(
            &format!("{base}/healthz"),
            "GET",
            "",
            Duration::from_secs(1),
        )
        .is_err()
        {
            return Ok(()); // gone: drained and shut down
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(())
}

/// One request; the answer's status code.
fn request(url: &str, method: &str, headers: &str, timeout: Duration) -> anyhow::Result<String> {
    let rest = url
        .strip_prefix("http://")
        .context("the probe URL must start with http://")?;
    let (authority, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, "/"),
    };
    let address = authority
        .to_socket_addrs()
        .with_context(|| format!("resolving {authority}"))?
        .next()
        .with_context(|| format!("{authority} resolves to no address"))?;
    let mut stream = TcpStream::connect_timeout(&address, timeout)
        .with_context(|| format!("connecting to {address}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    // One write: a request in pieces could meet the answer (and the server's close) halfway.
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n{headers}\r\n"
    );
    stream.write_all(request.as_bytes())?;
    let mut head = [0u8; 64];
    let read = stream.read(&mut head).context("reading the answer")?;
    let status_line = String::from_utf8_lossy(&head[..read]);
    Ok(status_line
        .split(' ')
        .nth(1)
        .unwrap_or_default()
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_200_is_healthy_and_anything_else_is_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for answer in [
                "HTTP/1.1 200 OK\r\n\r\nok\n",
                "HTTP/1.1 503 Service Unavailable\r\n\r\n",
            ] {
                let (mut stream, _) = listener.accept().unwrap();
                // The whole request before the answer, as a server reads it.
                let mut request = Vec::new();
                let mut chunk = [0u8; 512];
                while !request.windows(4).any(|end| end == b"\r\n\r\n") {
                    let read = stream.read(&mut chunk).unwrap();
                    assert!(read > 0, "the request ended early");
                    request.extend_from_slice(&chunk[..read]);
                }
                stream.write_all(answer.as_bytes()).unwrap();
            }
        });
        let url = format!("http://{address}/healthz");
        probe(&url, Duration::from_secs(2)).unwrap();
        let error = probe(&url, Duration::from_secs(2)).unwrap_err().to_string();
        assert!(error.contains("\"503\""), "{error}");
        server.join().unwrap();
        assert!(probe("https://x/", Duration::from_secs(1)).is_err());
    }
}
