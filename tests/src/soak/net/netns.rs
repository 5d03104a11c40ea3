//! The soak's network: a hub namespace holding two bridges, `app` (the
//! servers, the workers and this process) and `db` (PostgreSQL, the
//! servers and this process), and one namespace per part, each joined to
//! a bridge by a veth pair whose hub end is named after the part. Taking a
//! hub end down is a silent cut: the part's packets vanish, nobody gets a
//! FIN or an RST, and TCP retransmits once the link is up again.
//!
//! Names carry this process's id, so parallel runs do not collide, and a
//! run that was SIGKILLed leaves namespaces the next run removes (their
//! owner's process is gone). Dropping [`Net`] deletes every namespace,
//! which also deletes the veth pairs in them.

use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// The prefix of every namespace a soak makes; the owner's pid follows.
const PREFIX: &str = "relayger-soak-";

/// The soak's namespaces; dropping it removes them.
#[derive(Debug)]
pub(crate) struct Net {
    owner: String,
    /// `10.N`: the app bridge is `10.N.1.0/24`, the database's `10.N.2.0/24`.
    net: String,
    namespaces: Vec<String>,
    /// The host ends of the host's veth pairs.
    host_links: Vec<String>,
}

/// Which bridge a part joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bridge {
    App,
    Db,
}

impl Bridge {
    fn name(self) -> &'static str {
        match self {
            Bridge::App => "app",
            Bridge::Db => "db",
        }
    }

    fn subnet(self) -> u8 {
        match self {
            Bridge::App => 1,
            Bridge::Db => 2,
        }
    }
}

/// `ip ARGS`, which must succeed.
fn ip(args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("run ip (iproute2)")?;
    if !output.status.success() {
        bail!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

impl Net {
    /// The hub and its bridges, and this process on both (`10.N.1.1`,
    /// `10.N.2.1`). Needs root (CAP_NET_ADMIN).
    pub(crate) fn create() -> anyhow::Result<Net> {
        // Runs starting at once must not choose the same subnet: the choice
        // and the host's legs are made under a lock shared by all runs.
        let lock = std::fs::File::create(std::env::temp_dir().join("relayger-soak-net.lock"))
            .context("the network soak's lock file")?;
        lock.lock().context("lock the network soak's lock file")?;
        remove_orphans();
        let pid = std::process::id();
        let owner = format!("{PREFIX}{pid}-");
        let second = free_second_octet(pid)?;
        let mut net = Net {
            owner,
            net: format!("10.{second}"),
            namespaces: Vec::new(),
            host_links: Vec::new(),
        };
        let hub = net
            .add_namespace("hub")
            .context("create a network namespace (the network soak needs root: CAP_NET_ADMIN)")?;
        for bridge in [Bridge::App, Bridge::Db] {
            let name = bridge.name();
            ip(&["-n", &hub, "link", "add", name, "type", "bridge"])?;
            ip(&["-n", &hub, "link", "set", name, "up"])?;
            // The host's leg: `rsk<pid>a` / `rsk<pid>d` here, `host` in the hub.
            let host_end = format!("rsk{pid}{}", &name[..1]);
            let hub_end = format!("host-{name}");
            ip(&[
                "link", "add", &host_end, "type", "veth", "peer", "name", &hub_end, "netns", &hub,
            ])?;
            net.host_links.push(host_end.clone());
            ip(&["-n", &hub, "link", "set", &hub_end, "master", name])?;
            ip(&["-n", &hub, "link", "set", &hub_end, "up"])?;
            let address = format!("{}/24", net.address(bridge, 1));
            ip(&["addr", "add", &address, "dev", &host_end])?;
            ip(&["link", "set", &host_end, "up"])?;
        }
        drop(lock);
        Ok(net)
    }

    /// `10.N.<bridge>.<host>`.
    pub(crate) fn address(&self, bridge: Bridge, host: u8) -> String {
        format!("{}.{}.{host}", self.net, bridge.subnet())
    }

    /// The full name of the namespace `part`.
    pub(crate) fn namespace(&self, part: &str) -> String {
        format!("{}{part}", self.owner)
    }

    /// A new namespace for `part`, its loopback up.
    pub(crate) fn add_namespace(&mut self, part: &str) -> anyhow::Result<String> {
        let name = self.namespace(part);
        ip(&["netns", "add", &name])?;
        self.namespaces.push(name.clone());
        ip(&["-n", &name, "link", "set", "lo", "up"])?;
        Ok(name)
    }

    /// Joins namespace `part` to `bridge` as `10.N.<bridge>.<host>`: the
    /// part sees `eth-<bridge>`, the hub `<link>` (what [`Net::cut`] takes
    /// down).
    pub(crate) fn join(
        &self,
        part: &str,
        bridge: Bridge,
        host: u8,
        link: &str,
    ) -> anyhow::Result<String> {
        let hub = self.namespace("hub");
        let ns = self.namespace(part);
        let inside = format!("eth-{}", bridge.name());
        ip(&[
            "link", "add", link, "netns", &hub, "type", "veth", "peer", "name", &inside, "netns",
            &ns,
        ])?;
        ip(&["-n", &hub, "link", "set", link, "master", bridge.name()])?;
        ip(&["-n", &hub, "link", "set", link, "up"])?;
        let address = self.address(bridge, host);
        ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{address}/24"),
            "dev",
            &inside,
        ])?;
        ip(&["-n", &ns, "link", "set", &inside, "up"])?;
        Ok(address)
    }

    /// A silent cut of the hub end `link`: no packet passes either way.
    pub(crate) fn cut(&self, link: &str) -> anyhow::Result<()> {
        ip(&["-n", &self.namespace("hub"), "link", "set", link, "down"])
    }

    /// The link `link` carries packets again.
    pub(crate) fn heal(&self, link: &str) -> anyhow::Result<()> {
        ip(&["-n", &self.namespace("hub"), "link", "set", link, "up"])
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for link in &self.host_links {
            let _ = ip(&["link", "del", link]);
        }
        for ns in self.namespaces.iter().rev() {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// A second octet whose `10.N.1.0/24` and `10.N.2.0/24` no route of this
/// host already covers (another run's, say).
fn free_second_octet(pid: u32) -> anyhow::Result<u8> {
    let routes = Command::new("ip")
        .args(["-4", "route", "show"])
        .output()
        .context("ip route")?;
    let routes = String::from_utf8_lossy(&routes.stdout).into_owned();
    for step in 0..150_u32 {
        let second = u8::try_from(100 + (pid + step * 7) % 150).unwrap_or(100);
        let taken = routes.lines().any(|line| {
            line.starts_with(&format!("10.{second}.1."))
                || line.starts_with(&format!("10.{second}.2."))
        });
        if !taken {
            return Ok(second);
        }
    }
    bail!("no free 10.N.0.0/16 for the soak's network")
}

/// Deletes the namespaces (and host links) of soak runs whose process is
/// gone (a run that was SIGKILLed cannot clean up after itself).
fn remove_orphans() {
    let Ok(listing) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&listing.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
            for leg in ["a", "d"] {
                let _ = ip(&["link", "del", &format!("rsk{pid}{leg}")]);
            }
        }
    }
}
