//! A sandbox's links, addresses and default route over route netlink, in-process: one socket
//! on the host side, one opened in the sandbox's namespace; no `ip` process on the way.
use std::net::IpAddr;

use futures_util::TryStreamExt;
use rtnetlink::packet_route::link::{
    AfSpecInet6, AfSpecUnspec, In6AddrGenMode, InfoData, InfoVeth, LinkAttribute,
};
use rtnetlink::{Handle, LinkUnspec, LinkVeth, RouteMessageBuilder};

use super::*;

/// A netlink failure as an io error with the kernel's errno (e.g. `AlreadyExists` for EEXIST).
fn netlink_error(context: String) -> impl FnOnce(rtnetlink::Error) -> NetworkError {
    move |error| {
        let source = match &error {
            rtnetlink::Error::NetlinkError(message) => message.to_io(),
            other => io::Error::other(other.to_string()),
        };
        NetworkError::Io { context, source }
    }
}

/// Whether a link operation failed because the name is taken.
pub(super) fn name_taken(error: &NetworkError) -> bool {
    matches!(error, NetworkError::Io { source, .. } if source.kind() == io::ErrorKind::AlreadyExists)
}

/// A route-netlink connection whose socket lives in the namespace bind-mounted at `netns`
/// (None: the daemon's own). The socket is opened on a thread that joined the namespace and
/// stays bound to it; the connection task ends when the handle is dropped.
pub(super) async fn connect(netns: Option<PathBuf>) -> Result<Handle, NetworkError> {
    let runtime = tokio::runtime::Handle::current();
    let opened = in_netns(netns, move || {
        let _entered = runtime.enter();
        rtnetlink::new_connection()
    })
    .await?;
    let (connection, handle, _) = opened.map_err(io_error("open a route netlink socket"))?;
    tokio::spawn(connection);
    Ok(handle)
}

async fn index_of(handle: &Handle, name: &str) -> Result<u32, NetworkError> {
    let mut links = handle.link().get().match_name(name.to_owned()).execute();
    match links.try_next().await {
        Ok(Some(link)) => Ok(link.header.index),
        Ok(None) => Err(NetworkError::Io {
            context: format!("find link {name}"),
            source: io::ErrorKind::NotFound.into(),
        }),
        Err(e) => match netlink_error(format!("find link {name}"))(e) {
            // The kernel says "no such device" for a name it does not know.
            NetworkError::Io { context, source } if source.raw_os_error() == Some(libc::ENODEV) => {
                Err(NetworkError::Io {
                    context,
                    source: io::ErrorKind::NotFound.into(),
                })
            }
            other => Err(other),
        },
    }
}

async fn set(handle: &Handle, what: String, link: LinkUnspecBuilder) -> Result<(), NetworkError> {
    handle
        .link()
        .set(link.build())
        .execute()
        .await
        .map_err(netlink_error(what))
}

type LinkUnspecBuilder = rtnetlink::LinkMessageBuilder<LinkUnspec>;

/// No IPv6 link-local address on a link: set while it is down (the kernel applies flags
/// before this setting within one message, so it goes in a message of its own).
async fn no_ipv6_addresses(handle: &Handle, index: u32, name: &str) -> Result<(), NetworkError> {
    let link = LinkUnspec::new_with_index(index).append_extra_attribute(
        LinkAttribute::AfSpecUnspec(vec![AfSpecUnspec::Inet6(vec![AfSpecInet6::AddrGenMode(
            In6AddrGenMode::None,
        )])]),
    );
    set(handle, format!("turn off IPv6 addresses on {name}"), link).await
}

/// The veth pair of `att`'s slot, its sandbox end made straight in the namespace bind-mounted
/// at `att.netns_path` as `eth0` (moving a link between namespaces later would wait for an
/// RCU grace period, ~10 ms), then both ends configured: the gateway address on the host end,
/// the sandbox's address, `eth0` and `lo` up and the default route inside. Returns whether
/// the pair was made (false: its creation failed, so a leftover may hold the name and nothing
/// is ours to undo).
pub(super) async fn plug(
    host: &Handle,
    att: &Attachment,
    ipv6: bool,
) -> (bool, Result<(), NetworkError>) {
    let inside = match connect(Some(att.netns_path.clone())).await {
        Ok(inside) => inside,
        Err(e) => return (false, Err(e)),
    };
    let made = match File::open(&att.netns_path) {
        Err(e) => Err(io_error(format!("open {}", att.netns_path.display()))(e)),
        Ok(netns) => {
            let veth = &att.host_veth;
            let peer = rtnetlink::LinkMessageBuilder::<LinkUnspec>::new()
                .name(SANDBOX_IFNAME.to_owned())
                .setns_by_fd(netns.as_raw_fd())
                .build();
            let pair = LinkVeth::new(veth, SANDBOX_IFNAME)
                .set_info_data(InfoData::Veth(InfoVeth::Peer(peer)));
            host.link()
                .add(pair.build())
                .execute()
                .await
                .map_err(netlink_error(format!("create veth pair {veth}")))
        }
    };
    if let Err(e) = made {
        return (false, Err(e));
    }
    (true, configure(host, &inside, att, ipv6).await)
}

async fn configure(
    host: &Handle,
    inside: &Handle,
    att: &Attachment,
    ipv6: bool,
) -> Result<(), NetworkError> {
    let outside = bring_up(host, &att.host_veth, att.gateway, att.prefix_len, ipv6);
    let within = async {
        bring_up(inside, SANDBOX_IFNAME, att.address, att.prefix_len, ipv6).await?;
        let lo = index_of(inside, "lo").await?;
        set(
            inside,
            "set lo up".into(),
            LinkUnspec::new_with_index(lo).up(),
        )
        .await
    };
    let (outside, within) = tokio::join!(outside, within);
    outside.and(within)?;
    // The route needs the gateway's end up.
    inside
        .route()
        .add(
            RouteMessageBuilder::<Ipv4Addr>::new()
                .gateway(att.gateway)
                .build(),
        )
        .execute()
        .await
        .map_err(netlink_error(format!(
            "add the default route via {}",
            att.gateway
        )))
}

/// Gives the link `name` its address and brings it up (IPv6 addresses turned off first).
async fn bring_up(
    handle: &Handle,
    name: &str,
    address: Ipv4Addr,
    prefix_len: u8,
    ipv6: bool,
) -> Result<(), NetworkError> {
    let index = index_of(handle, name).await?;
    if ipv6 {
        no_ipv6_addresses(handle, index, name).await?;
    }
    handle
        .address()
        .add(index, IpAddr::V4(address), prefix_len)
        .execute()
        .await
        .map_err(netlink_error(format!(
            "add {address}/{prefix_len} to {name}"
        )))?;
    let up = LinkUnspec::new_with_index(index).up();
    set(handle, format!("set {name} up"), up).await
}

/// Whether a link named `name` exists on `handle`'s side.
pub(super) async fn exists(handle: &Handle, name: &str) -> Result<bool, NetworkError> {
    match index_of(handle, name).await {
        Ok(_) => Ok(true),
        Err(NetworkError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
