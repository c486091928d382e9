//! The sockmap engine's kernel side: an eBPF SK_SKB stream-verdict program, assembled here by
//! hand and loaded over the raw bpf(2) system call, its three maps, and the socket queries the
//! engine needs (socket cookie, TCP_INFO bytes_acked, SIOCOUTQ, the SO_RCVLOWAT kick).
//!
//! Why hand-assembled rather than `aya` with a C object: the program is 28 instructions (30
//! slots, as each of its two map loads takes two), so a BPF toolchain (clang, bpf-linker) at
//! build time and a loader crate with its own dependency tree would cost more than they save;
//! the instructions are listed below with their meaning. docs/ARCHITECTURE.md, step 6, gives
//! the whole trade.
//!
//! The program runs in softirq context for every skb arriving on a *source* socket:
//!
//! ```text
//! flow = flows[socket_cookie(skb)]            // absent: not ours, pass to user space
//! if skb.len == 0: return SK_PASS              // a FIN without data must reach the socket
//! if flow.remaining < skb.len:                 // the segment crosses the body end
//!     if flow.remaining > 0:                   // leave the body's last bytes to user space
//!         flow.tail = flow.remaining; flow.remaining = 0
//!     return SK_PASS
//! flow.remaining -= skb.len                    // atomic
//! return sk_redirect_map(skb, destinations, flow.destination, 0)   // out of dst's send side
//! ```
//!
//! Sources and destinations live in two maps: the program is attached only to `sources`, so
//! bytes arriving on a destination (a pipelined request from the client) stay in its ordinary
//! receive queue instead of being diverted into the psock's queue, which the kernel discards
//! when the socket leaves the map.
#![allow(unsafe_code)] // bpf(2), getsockopt and ioctl have no safe wrapper in rustix.

use std::ffi::c_void;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

// bpf(2) commands, map and program types (include/uapi/linux/bpf.h).
const BPF_MAP_CREATE: i32 = 0;
const BPF_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_MAP_UPDATE_ELEM: i32 = 2;
const BPF_MAP_DELETE_ELEM: i32 = 3;
const BPF_PROG_LOAD: i32 = 5;
const BPF_PROG_ATTACH: i32 = 8;
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_MAP_TYPE_SOCKMAP: u32 = 15;
const BPF_PROG_TYPE_SK_SKB: u32 = 14;
const BPF_SK_SKB_STREAM_VERDICT: u32 = 5;
const BPF_ANY: u64 = 0;
const BPF_PSEUDO_MAP_FD: u8 = 1;
// Helper numbers (enum bpf_func_id).
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_FUNC_GET_SOCKET_COOKIE: i32 = 46;
const BPF_FUNC_SK_REDIRECT_MAP: i32 = 52;
const SK_PASS: i32 = 1;

/// One flow's state in the `flows` map, keyed by the source socket's cookie.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FlowState {
    /// The destination's slot in the `destinations` map.
    pub destination: u32,
    _pad: u32,
    /// Bytes the program may still redirect; it passes any segment longer than this.
    pub remaining: u64,
    /// Set by the program when a segment crossed the body end: the body bytes it held, which
    /// user space must read and forward itself. `remaining` is then 0.
    pub tail: u64,
}

impl FlowState {
    pub(crate) fn new(destination: u32, remaining: u64) -> Self {
        FlowState {
            destination,
            _pad: 0,
            remaining,
            tail: 0,
        }
    }
}

/// The loaded program and its maps, for one worker.
#[derive(Debug)]
pub(crate) struct Program {
    _program: OwnedFd,
    sources: OwnedFd,
    destinations: OwnedFd,
    flows: OwnedFd,
}

impl Program {
    /// Creates the maps with `slots` entries each, loads the verdict program and attaches it to
    /// the sources map. Fails with EPERM without CAP_BPF/CAP_NET_ADMIN.
    pub(crate) fn load(slots: u32) -> io::Result<Program> {
        let sources = map_create(BPF_MAP_TYPE_SOCKMAP, 4, 4, slots)?;
        let destinations = map_create(BPF_MAP_TYPE_SOCKMAP, 4, 4, slots)?;
        let flows = map_create(BPF_MAP_TYPE_HASH, 8, size_of::<FlowState>() as u32, slots)?;
        let instructions = verdict_program(flows.as_raw_fd(), destinations.as_raw_fd());
        let program = prog_load(&instructions)?;
        prog_attach(
            sources.as_raw_fd(),
            program.as_raw_fd(),
            BPF_SK_SKB_STREAM_VERDICT,
        )?;
        Ok(Program {
            _program: program,
            sources,
            destinations,
            flows,
        })
    }

    /// Puts a source socket in slot `slot`: from now on the program sees its segments.
    /// EOPNOTSUPP when the socket is no longer ESTABLISHED (the peer closed).
    pub(crate) fn insert_source(&self, slot: u32, socket: BorrowedFd<'_>) -> io::Result<()> {
        map_update(&self.sources, &slot, &(socket.as_raw_fd() as u32))
    }

    /// Puts a destination socket in slot `slot`, so the program can redirect to it.
    pub(crate) fn insert_destination(&self, slot: u32, socket: BorrowedFd<'_>) -> io::Result<()> {
        map_update(&self.destinations, &slot, &(socket.as_raw_fd() as u32))
    }

    /// Takes the source in `slot` out of the map; its socket gets its own TCP handlers back.
    pub(crate) fn remove_source(&self, slot: u32) -> io::Result<()> {
        map_delete(&self.sources, &slot)
    }

    /// Takes the destination in `slot` out of the map.
    pub(crate) fn remove_destination(&self, slot: u32) -> io::Result<()> {
        map_delete(&self.destinations, &slot)
    }

    /// Sets the state of the flow whose source has `cookie`.
    pub(crate) fn set_flow(&self, cookie: u64, state: &FlowState) -> io::Result<()> {
        map_update(&self.flows, &cookie, state)
    }

    /// The state of the flow whose source has `cookie`.
    pub(crate) fn flow(&self, cookie: u64) -> io::Result<FlowState> {
        let mut state = FlowState::default();
        map_lookup(&self.flows, &cookie, &mut state)?;
        Ok(state)
    }

    /// Forgets the flow whose source has `cookie`.
    pub(crate) fn remove_flow(&self, cookie: u64) -> io::Result<()> {
        map_delete(&self.flows, &cookie)
    }
}

/// The verdict program (see the module docs). Registers: r6 = skb, r7 = flow, r8 = skb->len,
/// r9 = flow->remaining.
fn verdict_program(flows: RawFd, destinations: RawFd) -> Vec<Insn> {
    vec![
        /* 0 */ Insn::mov64_reg(6, 1), //                  r6 = skb
        /* 1 */ Insn::call(BPF_FUNC_GET_SOCKET_COOKIE), // r0 = cookie(skb)
        /* 2 */ Insn::stx_dw(10, -8, 0), //                *(u64 *)(fp - 8) = r0
        /* 3 */ Insn::mov64_reg(2, 10), //                 r2 = fp
        /* 4 */ Insn::add64_imm(2, -8), //                 r2 = &cookie
        /* 5 */ Insn::ld_map_fd(1, flows), //              r1 = flows
        /* 6 */ Insn::ld_map_fd_high(),
        /* 7 */ Insn::call(BPF_FUNC_MAP_LOOKUP_ELEM), //   r0 = flows[cookie]
        /* 8 */ Insn::jeq_imm(0, 0, 19), //                not ours -> pass (28)
        /* 9 */ Insn::mov64_reg(7, 0), //                  r7 = flow
        /* 10 */ Insn::ldx_w(8, 6, 0), //                  r8 = skb->len
        /* 11 */ Insn::jeq_imm(8, 0, 16), //               FIN without data -> pass (28)
        /* 12 */ Insn::ldx_dw(9, 7, 8), //                 r9 = flow->remaining
        /* 13 */
        Insn::jlt_reg(9, 8, 10), //               crosses the body end -> straddle (24)
        /* 14 */ Insn::mov64_imm(1, 0),
        /* 15 */ Insn::sub64_reg(1, 8), //                 r1 = -len
        /* 16 */ Insn::atomic_add_dw(7, 8, 1), //          flow->remaining -= len
        /* 17 */ Insn::ldx_w(3, 7, 0), //                  r3 = flow->destination
        /* 18 */ Insn::mov64_reg(1, 6), //                 r1 = skb
        /* 19 */ Insn::ld_map_fd(2, destinations), //      r2 = destinations
        /* 20 */ Insn::ld_map_fd_high(),
        /* 21 */
        Insn::mov64_imm(4, 0), //                 r4 = flags: out of dst's send side
        /* 22 */
        Insn::call(BPF_FUNC_SK_REDIRECT_MAP), //  r0 = SK_PASS if queued, else SK_DROP
        /* 23 */ Insn::exit(),
        // straddle: the segment holds the body's last bytes and more; user space finishes it.
        /* 24 */
        Insn::jeq_imm(9, 0, 3), //                already stopped -> pass (28)
        /* 25 */ Insn::stx_dw(7, 16, 9), //                flow->tail = remaining
        /* 26 */ Insn::mov64_imm(1, 0),
        /* 27 */
        Insn::stx_dw(7, 8, 1), //                 flow->remaining = 0: redirect no more
        // pass:
        /* 28 */ Insn::mov64_imm(0, SK_PASS),
        /* 29 */ Insn::exit(),
    ]
}

/// Where each jump of [`verdict_program`] must land (the offsets are counted by hand): checked
/// by a test, so an edit that moves code fails there rather than in the verifier or, worse,
/// lands somewhere plausible.
#[cfg(test)]
const JUMP_TARGETS: [(usize, usize); 4] = [(8, 28), (11, 28), (13, 24), (24, 28)];

/// One eBPF instruction (struct bpf_insn).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (src << 4) | dst,
            off,
            imm,
        }
    }
    fn mov64_reg(dst: u8, src: u8) -> Insn {
        Insn::new(0xbf, dst, src, 0, 0) // BPF_ALU64 | BPF_MOV | BPF_X
    }
    fn mov64_imm(dst: u8, imm: i32) -> Insn {
        Insn::new(0xb7, dst, 0, 0, imm) // BPF_ALU64 | BPF_MOV | BPF_K
    }
    fn add64_imm(dst: u8, imm: i32) -> Insn {
        Insn::new(0x07, dst, 0, 0, imm) // BPF_ALU64 | BPF_ADD | BPF_K
    }
    fn sub64_reg(dst: u8, src: u8) -> Insn {
        Insn::new(0x1f, dst, src, 0, 0) // BPF_ALU64 | BPF_SUB | BPF_X
    }
    fn stx_dw(dst: u8, off: i16, src: u8) -> Insn {
        Insn::new(0x7b, dst, src, off, 0) // BPF_STX | BPF_MEM | BPF_DW
    }
    fn ldx_w(dst: u8, src: u8, off: i16) -> Insn {
        Insn::new(0x61, dst, src, off, 0) // BPF_LDX | BPF_MEM | BPF_W
    }
    fn ldx_dw(dst: u8, src: u8, off: i16) -> Insn {
        Insn::new(0x79, dst, src, off, 0) // BPF_LDX | BPF_MEM | BPF_DW
    }
    fn atomic_add_dw(dst: u8, off: i16, src: u8) -> Insn {
        Insn::new(0xdb, dst, src, off, 0) // BPF_STX | BPF_ATOMIC | BPF_DW, imm = BPF_ADD
    }
    fn jeq_imm(dst: u8, imm: i32, off: i16) -> Insn {
        Insn::new(0x15, dst, 0, off, imm) // BPF_JMP | BPF_JEQ | BPF_K
    }
    fn jlt_reg(dst: u8, src: u8, off: i16) -> Insn {
        Insn::new(0xad, dst, src, off, 0) // BPF_JMP | BPF_JLT | BPF_X (unsigned)
    }
    fn call(helper: i32) -> Insn {
        Insn::new(0x85, 0, 0, 0, helper) // BPF_JMP | BPF_CALL
    }
    fn exit() -> Insn {
        Insn::new(0x95, 0, 0, 0, 0) // BPF_JMP | BPF_EXIT
    }
    fn ld_map_fd(dst: u8, fd: RawFd) -> Insn {
        Insn::new(0x18, dst, BPF_PSEUDO_MAP_FD, 0, fd) // BPF_LD | BPF_IMM | BPF_DW, low half
    }
    fn ld_map_fd_high() -> Insn {
        Insn::new(0, 0, 0, 0, 0) // high half of the 64-bit immediate
    }
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct ProgAttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
}

/// bpf(2) with one attribute struct; returns the non-negative result.
fn bpf<T>(command: i32, attr: &mut T) -> io::Result<i64> {
    // SAFETY: `attr` is a live, initialised `#[repr(C)]` struct laid out as the prefix of
    // union bpf_attr that `command` reads, and its size is passed with it (bpf(2)); any
    // pointers inside it point to buffers the caller keeps alive for the call.
    let result = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            command,
            attr as *mut T as *mut c_void,
            size_of::<T>() as u32,
        )
    };
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

fn owned_fd(fd: i64) -> io::Result<OwnedFd> {
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::other("bpf returned a bad fd"))?;
    // SAFETY: bpf(2) just returned this fd for a new object; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn map_create(map_type: u32, key_size: u32, value_size: u32, entries: u32) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type,
        key_size,
        value_size,
        max_entries: entries,
        map_flags: 0,
    };
    owned_fd(bpf(BPF_MAP_CREATE, &mut attr)?)
}

fn map_update<K, V>(map: &OwnedFd, key: &K, value: &V) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key as *const K as u64,
        value: value as *const V as u64,
        flags: BPF_ANY,
        ..Default::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

fn map_lookup<K, V>(map: &OwnedFd, key: &K, value: &mut V) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key as *const K as u64,
        value: value as *mut V as u64,
        ..Default::default()
    };
    bpf(BPF_MAP_LOOKUP_ELEM, &mut attr).map(drop)
}

fn map_delete<K>(map: &OwnedFd, key: &K) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key as *const K as u64,
        ..Default::default()
    };
    bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(drop)
}

fn prog_load(instructions: &[Insn]) -> io::Result<OwnedFd> {
    let license = b"GPL\0";
    let mut log = vec![0u8; 64 * 1024];
    let mut name = [0u8; 16];
    name[..14].copy_from_slice(b"sluice_verdict");
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_SK_SKB,
        insn_cnt: instructions.len() as u32,
        insns: instructions.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        prog_name: name,
        expected_attach_type: BPF_SK_SKB_STREAM_VERDICT,
        ..Default::default()
    };
    match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => owned_fd(fd),
        Err(error) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let verifier = String::from_utf8_lossy(&log[..end]);
            Err(io::Error::new(
                error.kind(),
                format!("{error}; verifier: {}", verifier.trim()),
            ))
        }
    }
}

fn prog_attach(map: RawFd, program: RawFd, attach_type: u32) -> io::Result<()> {
    let mut attr = ProgAttachAttr {
        target_fd: map as u32,
        attach_bpf_fd: program as u32,
        attach_type,
        attach_flags: 0,
    };
    bpf(BPF_PROG_ATTACH, &mut attr).map(drop)
}

/// The socket's cookie (SO_COOKIE): the key the program finds its flow by.
pub(crate) fn socket_cookie(socket: BorrowedFd<'_>) -> io::Result<u64> {
    let mut cookie = 0u64;
    getsockopt(socket, libc::SOL_SOCKET, libc::SO_COOKIE, &mut cookie)?;
    Ok(cookie)
}

/// Bytes of this socket's output the peer has acknowledged (TCP_INFO tcpi_bytes_acked).
pub(crate) fn bytes_acked(socket: BorrowedFd<'_>) -> io::Result<u64> {
    // SAFETY: tcp_info is plain integers; all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    getsockopt(socket, libc::IPPROTO_TCP, libc::TCP_INFO, &mut info)?;
    Ok(info.tcpi_bytes_acked)
}

/// Bytes received in order on this socket since it connected (TCP_INFO tcpi_bytes_received).
pub(crate) fn bytes_received(socket: BorrowedFd<'_>) -> io::Result<u64> {
    // SAFETY: tcp_info is plain integers; all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    getsockopt(socket, libc::IPPROTO_TCP, libc::TCP_INFO, &mut info)?;
    Ok(info.tcpi_bytes_received)
}

/// Bytes in the socket's send queue, sent or not, not yet acknowledged (SIOCOUTQ, tcp(7)).
pub(crate) fn send_queue(socket: BorrowedFd<'_>) -> io::Result<u64> {
    let mut queued: libc::c_int = 0;
    // SAFETY: the fd is borrowed, so open; SIOCOUTQ writes one int through the pointer, which
    // points to `queued`.
    let result = unsafe { libc::ioctl(socket.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::try_from(queued).unwrap_or(0))
}

/// Bytes waiting in the socket's receive queue (FIONREAD).
pub(crate) fn receive_queue(socket: BorrowedFd<'_>) -> io::Result<u64> {
    Ok(rustix::io::ioctl_fionread(socket)?)
}

/// Bytes that a read of the socket would return now, up to `up_to`, counted without copying
/// or consuming them (MSG_PEEK | MSG_TRUNC, recv(2) and tcp(7)). Unlike FIONREAD, which counts
/// every byte received and not yet read, this sees only what is really in the receive queue.
pub(crate) fn readable(socket: BorrowedFd<'_>, up_to: u64) -> io::Result<u64> {
    let len = usize::try_from(up_to).unwrap_or(usize::MAX);
    let flags = libc::MSG_PEEK | libc::MSG_TRUNC | libc::MSG_DONTWAIT;
    // SAFETY: the fd is borrowed, so open; with MSG_TRUNC a TCP socket never writes to the
    // buffer (tcp(7)), so a null pointer with any length is not dereferenced.
    let result = unsafe { libc::recv(socket.as_raw_fd(), std::ptr::null_mut(), len, flags) };
    if result < 0 {
        let error = io::Error::last_os_error();
        if error.kind() == io::ErrorKind::WouldBlock {
            return Ok(0);
        }
        return Err(error);
    }
    Ok(u64::try_from(result).unwrap_or(0))
}

/// Makes the kernel run the socket's data-ready callback now: setting SO_RCVLOWAT calls
/// tcp_data_ready (net/ipv4/tcp.c, tcp_set_rcvlowat), so segments that were queued before the
/// socket entered the map reach the verdict program without waiting for the next arrival.
pub(crate) fn kick(socket: BorrowedFd<'_>) -> io::Result<()> {
    let one: libc::c_int = 1;
    setsockopt(socket, libc::SOL_SOCKET, libc::SO_RCVLOWAT, &one)
}

/// Stops the kernel from calling the socket's data-ready callback for new segments, which then
/// wait in the ordinary receive queue: SO_RCVLOWAT at the most the kernel allows (it caps the
/// value at half of tcp_rmem's maximum), as tcp_data_ready only calls the callback once that
/// many bytes are unread (net/ipv4/tcp_input.c). [`kick`] lowers it again.
pub(crate) fn hold(socket: BorrowedFd<'_>) -> io::Result<()> {
    let most: libc::c_int = libc::c_int::MAX;
    setsockopt(socket, libc::SOL_SOCKET, libc::SO_RCVLOWAT, &most)
}

fn getsockopt<T>(socket: BorrowedFd<'_>, level: i32, name: i32, value: &mut T) -> io::Result<()> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the fd is borrowed, so open; `value` is a live `T` of `len` bytes that the
    // kernel fills (up to `len`), and `len` is a live socklen_t.
    let result = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            level,
            name,
            value as *mut T as *mut c_void,
            &mut len,
        )
    };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn setsockopt<T>(socket: BorrowedFd<'_>, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: the fd is borrowed, so open; `value` is a live `T` whose size is passed along.
    let result = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            value as *const T as *const c_void,
            size_of::<T>() as libc::socklen_t,
        )
    };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_on_its_label() {
        let program = verdict_program(3, 4);
        let jumps: Vec<(usize, usize)> = program
            .iter()
            .enumerate()
            .filter(|(_, insn)| insn.code & 0x07 == 0x05 && insn.code != 0x85 && insn.code != 0x95)
            .map(|(at, insn)| (at, (at as i64 + 1 + i64::from(insn.off)) as usize))
            .collect();
        assert_eq!(jumps, JUMP_TARGETS);
    }

    /// The module docs give the program's size, and the trade against `aya` rests on it.
    #[test]
    fn program_is_as_long_as_the_docs_say() {
        assert_eq!(verdict_program(3, 4).len(), 30);
    }

    #[test]
    fn program_loads_where_bpf_is_allowed() {
        match Program::load(8) {
            Ok(_) => {}
            Err(error) if error.raw_os_error() == Some(libc::EPERM) => {
                eprintln!("skipped: needs root or CAP_BPF ({error})");
            }
            Err(error) => panic!("program failed to load: {error}"),
        }
    }
}
