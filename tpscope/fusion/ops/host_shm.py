"""Host memory shared by the ranks of one host, for mode `host_staged` (tpscope.fusion.ops.host_staged).

One region per process group: a file in /dev/shm made by the group's rank 0, mapped by every rank
(MAP_SHARED) and, on CUDA, page-locked and mapped into the GPU's address space
(`cuMemHostRegister`, as NCCL's shm transport registers its own /dev/shm segments), so that
`copy_(..., non_blocking=True)` between it and the GPU runs on a copy engine.

Layout: a header of sequence flags, one 64-byte line each (`ready[p]`: pieces rank p has staged
so far; `done[p]`: the last call whose staged pieces rank p has finished reading), then two
slots per rank (calls use them in turn). Flags only grow (32-bit, compared cyclically), so a
waiter never mistakes an old value for a new one.

Ordering without SMs: on CUDA a stream writes a flag with `cuStreamWriteValue32` after its copies
(the write is fenced behind them) and waits for one with `cuStreamWaitValue32` (GEQ): the copy
engines and the stream front-end do it, no kernel. On CPU (gloo) the same calls store into the
mapped flag and poll it.

The file's name holds its creator's pid (`tpscope-hs-<pid>-<token>`). It is unlinked as soon as
every rank has mapped it (the memory lives while a mapping does, so a crash frees it), and a file
left by a creator that died before that is removed by the next creation on the host. Where
/dev/shm has no room, the region is anonymous shared memory (memfd) that the peers open through
/proc/<pid>/fd: nothing to clean up.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import re
import secrets
import socket
import time
from typing import Any

import torch
import torch.distributed as dist

from tpscope.errors import UserError
from tpscope.fusion.ops.validate import check_host_local

SHM_DIR = "/dev/shm"
SHM_DIR_ENV = "TPSCOPE_SHM_DIR"
"""Where the region files go instead of SHM_DIR (a tmpfs mount that every rank of the host sees);
no fallback from it."""
PREFIX = "tpscope-hs"
_STALE = re.compile(rf"^{PREFIX}-(\d+)-[0-9a-f]+$")
FLAG_LINE = 64
"""Bytes between two flags (one cache line each: a flag's writer never shares a line)."""
ALIGN = 4096
WAIT_TIMEOUT_S = 300.0
"""CPU path: how long a rank polls a peer's flag before it gives up (a peer died or hung)."""
_WRAP = 1 << 32


class SetupError(UserError, RuntimeError):
    """The ranks cannot share a region (no room or no folder for it, ranks that do not share the
    folder, a driver without stream memory operations): one line, raised by every rank alike
    (`tpscope run` prints it and exits 2)."""


def ahead(flag: int, value: int) -> bool:
    """`flag >= value` in 32-bit cyclic order (cuStreamWaitValue32's GEQ)."""
    return ((flag - value) % _WRAP) < (1 << 31)


def _to_int32(value: int) -> int:
    value %= _WRAP
    return value - _WRAP if value >= 1 << 31 else value


# ---------------------------------------------------------------------------------------------
# libcuda: host registration and stream memory operations (ctypes; torch binds neither)


class _Driver:
    """The few driver calls the CUDA path needs, loaded once."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")

        def fn(*names: str):
            for name in names:
                if hasattr(lib, name):
                    return getattr(lib, name)
            raise RuntimeError(f"mode host_staged: libcuda has none of {', '.join(names)}")

        self.register = fn("cuMemHostRegister_v2", "cuMemHostRegister")
        self.unregister = fn("cuMemHostUnregister")
        self.device_pointer = fn("cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer")
        self.wait32 = fn("cuStreamWaitValue32_v2", "cuStreamWaitValue32")
        self.write32 = fn("cuStreamWriteValue32_v2", "cuStreamWriteValue32")
        for f in (self.wait32, self.write32):
            f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        self.register.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
        self.unregister.argtypes = [ctypes.c_void_p]
        self.device_pointer.argtypes = [
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.c_void_p,
            ctypes.c_uint,
        ]
        self._error_string = lib.cuGetErrorString

    def check(self, code: int, what: str) -> None:
        if code:
            text = ctypes.c_char_p()
            self._error_string(code, ctypes.byref(text))
            name = text.value.decode() if text.value else f"CUresult {code}"
            raise RuntimeError(f"mode host_staged: {what} failed: {name}")


_DRIVER: list[_Driver] = []

CU_MEMHOSTREGISTER_PORTABLE_DEVICEMAP = 0x1 | 0x2
CU_STREAM_WAIT_VALUE_GEQ = 0x0
CU_STREAM_WRITE_VALUE_DEFAULT = 0x0


def driver() -> _Driver:
    if not _DRIVER:
        _DRIVER.append(_Driver())
    return _DRIVER[0]


# ---------------------------------------------------------------------------------------------
# the region


def shm_dir() -> str:
    """The folder of the region files: $TPSCOPE_SHM_DIR, else /dev/shm."""
    return os.environ.get(SHM_DIR_ENV) or SHM_DIR


def _remove_stale(directory: str) -> list[str]:
    """Unlink the region files whose creator is no longer alive; returns their names."""
    removed = []
    with contextlib.suppress(OSError):
        for name in os.listdir(directory):
            m = _STALE.match(name)
            if not m:
                continue
            try:
                os.kill(int(m.group(1)), 0)
            except ProcessLookupError:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(directory, name))
                    removed.append(name)
            except PermissionError:
                pass  # alive, another user's
    return removed


_HELD: dict[str, int] = {}
"""Regions in anonymous memory (memfd) this process made: their path under /proc -> the
descriptor that keeps them reachable until every rank has opened them."""


def _create(directory: str, nbytes: int) -> str:
    """A new region file of `nbytes` (its blocks reserved now: a full /dev/shm is an error here,
    not a SIGBUS at the first copy); returns its path. A /dev/shm without room (a container's
    64 MiB) falls back to anonymous shared memory (`memfd_create`, which /dev/shm's size does not
    cap), reached by the peers through /proc; a folder the user chose does not."""
    _remove_stale(directory)
    path = os.path.join(directory, f"{PREFIX}-{os.getpid()}-{secrets.token_hex(6)}")
    default = directory == SHM_DIR and not os.environ.get(SHM_DIR_ENV)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        if default and exc.errno in (errno.ENOENT, errno.ENOSPC):
            return _create_memfd(nbytes)
        raise OSError(
            f"mode host_staged: cannot create a file in {directory} ({exc.strerror}); set "
            f"{SHM_DIR_ENV} to a folder that every rank of the host shares"
        ) from None
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as exc:
        os.close(fd)
        os.unlink(path)
        if default and exc.errno == errno.ENOSPC:
            return _create_memfd(nbytes)
        raise OSError(
            f"mode host_staged: cannot reserve {nbytes / 2**20:.0f} MiB in {directory} "
            f"({exc.strerror}); make it larger, set {SHM_DIR_ENV} to another tmpfs folder, or use "
            "another mode"
        ) from None
    os.close(fd)
    return path


def _create_memfd(nbytes: int) -> str:
    """A region in anonymous shared memory; returns the path the peers open it by."""
    fd = os.memfd_create(f"{PREFIX}-{os.getpid()}", os.MFD_CLOEXEC)
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as exc:
        os.close(fd)
        raise OSError(
            f"mode host_staged: cannot reserve {nbytes / 2**20:.0f} MiB in {SHM_DIR} nor in "
            f"anonymous shared memory ({exc.strerror}); use another mode"
        ) from None
    path = f"/proc/{os.getpid()}/fd/{fd}"
    _HELD[path] = fd
    return path


def _release(path: str) -> None:
    """Once every rank has mapped it (or failed to): the file's name goes, or the memfd's
    descriptor; the memory stays while a mapping does."""
    fd = _HELD.pop(path, None)
    with contextlib.suppress(OSError):
        if fd is None:
            os.unlink(path)
        else:
            os.close(fd)


def _round_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


class Region:
    """One group's mapped region (see the module docstring)."""

    def __init__(
        self, path: str, tp: int, rank: int, slot_bytes: int, device: torch.device
    ) -> None:
        self.tp, self.rank, self.slot_bytes, self.device, self.path = (
            tp,
            rank,
            slot_bytes,
            device,
            path,
        )
        self.header_bytes = _round_up(2 * tp * FLAG_LINE)
        self.nbytes = self.header_bytes + 2 * tp * slot_bytes
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            raise OSError(
                f"{path} is not there: the ranks do not share one {SHM_DIR} (or {SHM_DIR_ENV} "
                "folder)"
            ) from None
        try:
            self._map = mmap.mmap(fd, self.nbytes, mmap.MAP_SHARED)
        finally:
            os.close(fd)
        self.bytes = torch.frombuffer(self._map, dtype=torch.uint8)
        self._flags = self.bytes[: self.header_bytes].view(torch.int32)[:: FLAG_LINE // 4]
        self.host_ptr = self.bytes.data_ptr()
        self.dev_ptr = 0
        if device.type == "cuda":
            drv = driver()
            # a runtime call: the device's primary context current on this thread
            torch.cuda.synchronize(device)
            drv.check(
                drv.register(self.host_ptr, self.nbytes, CU_MEMHOSTREGISTER_PORTABLE_DEVICEMAP),
                f"cuMemHostRegister of {self.nbytes / 2**20:.0f} MiB",
            )
            ptr = ctypes.c_uint64()
            drv.check(
                drv.device_pointer(ctypes.byref(ptr), self.host_ptr, 0), "cuMemHostGetDevicePointer"
            )
            self.dev_ptr = ptr.value
            # a driver without stream memory operations fails here, at set-up, on every rank alike
            # (own flag, not yet used: its later writes are on streams that follow this one)
            self.post(self.done(rank), 0)
            self.wait(self.done(rank), 0, "its own flag")
        self.calls = 0
        """Op calls so far on this group (every rank makes the same calls in the same order)."""
        self.posted = 0
        """Pieces each rank has staged so far (the value its `ready` flag reaches)."""

    # flags: ready[p] at index p, done[p] at index tp + p
    def ready(self, p: int) -> int:
        return p

    def done(self, p: int) -> int:
        return self.tp + p

    def slot(
        self, owner: int, which: int, dtype: torch.dtype, shape: tuple[int, ...]
    ) -> torch.Tensor:
        """`owner`'s slot `which` (0 or 1) as a tensor of `shape`."""
        start = self.header_bytes + (2 * owner + which) * self.slot_bytes
        count = 1
        for d in shape:
            count *= d
        nbytes = count * torch.empty((), dtype=dtype).element_size()
        return self.bytes[start : start + nbytes].view(dtype).view(shape)

    def post(self, flag: int, value: int) -> None:
        """Set `flag` to `value` once the work queued before on the current stream is done (CPU:
        now)."""
        if self.device.type == "cuda":
            drv = driver()
            stream = torch.cuda.current_stream(self.device).cuda_stream
            drv.check(
                drv.write32(
                    stream,
                    self.dev_ptr + flag * FLAG_LINE,
                    value % _WRAP,
                    CU_STREAM_WRITE_VALUE_DEFAULT,
                ),
                "cuStreamWriteValue32",
            )
        else:
            self._flags[flag] = _to_int32(value)

    def wait(self, flag: int, value: int, what: str) -> None:
        """Work queued after this on the current stream waits for `flag` >= `value` (CPU: this
        call returns then, or raises after WAIT_TIMEOUT_S)."""
        if self.device.type == "cuda":
            drv = driver()
            stream = torch.cuda.current_stream(self.device).cuda_stream
            drv.check(
                drv.wait32(
                    stream, self.dev_ptr + flag * FLAG_LINE, value % _WRAP, CU_STREAM_WAIT_VALUE_GEQ
                ),
                "cuStreamWaitValue32",
            )
            return
        flags = self._flags
        if ahead(int(flags[flag]), value):
            return
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        spins = 0
        while not ahead(int(flags[flag]), value):
            spins += 1
            if spins > 64:
                time.sleep(5e-5)
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"mode host_staged: timed out after {WAIT_TIMEOUT_S:.0f} s waiting for "
                        f"{what}: a peer rank died or hung"
                    )

    def close(self) -> None:
        """Unregister and unmap (the caller made sure no copy or wait still uses it)."""
        if self.dev_ptr:
            driver().check(driver().unregister(self.host_ptr), "cuMemHostUnregister")
            self.dev_ptr = 0
        self._flags = self.bytes = None  # type: ignore[assignment]
        with contextlib.suppress(BufferError):
            self._map.close()  # views still alive elsewhere: the mapping goes with the last one


_REGIONS: dict[str, Region] = {}


def _group_rank0(group: Any) -> int:
    return dist.get_global_rank(group, 0) if group is not None else 0


def region(group: Any, slot_bytes: int, device: torch.device) -> Region:
    """This group's region with slots of at least `slot_bytes`, made (or made again, larger) on
    first need: collective then, and every rank asks for the same sizes in the same order. Refuses
    a group that spans hosts or mixes CPU and CUDA ranks, the same way on every rank."""
    key = (group if group is not None else dist.group.WORLD).group_name
    current = _REGIONS.get(key)
    if current is not None and current.slot_bytes >= slot_bytes:
        return current
    tp, rank = dist.get_world_size(group), dist.get_rank(group)
    peers: list[Any] = [None] * tp
    dist.all_gather_object(peers, (socket.gethostname(), device.type), group=group)
    check_host_local([p[0] for p in peers], [p[1] for p in peers])
    if current is not None:  # every rank's copies and waits on the old region are over
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dist.barrier(group=group)
        current.close()
        del _REGIONS[key]
    slot_bytes = _round_up(max(slot_bytes, current.slot_bytes if current else 0))
    nbytes = _round_up(2 * tp * FLAG_LINE) + 2 * tp * slot_bytes
    box: list[Any] = [None]
    path = ""
    try:
        if rank == 0:
            try:
                path = _create(shm_dir(), nbytes)
                box[0] = ("path", path)
            except OSError as exc:
                box[0] = ("error", str(exc))
        dist.broadcast_object_list(box, src=_group_rank0(group), group=group)
        kind, text = box[0]
        if kind == "error":
            raise SetupError(text)
        made, error = None, ""
        try:
            made = Region(text, tp, rank, slot_bytes, device)
        except (OSError, RuntimeError) as exc:
            error = f"rank {rank}: {str(exc).splitlines()[0]}"
        errors: list[Any] = [None] * tp
        dist.all_gather_object(errors, error, group=group)  # every rank has mapped it, or failed
    finally:  # mapped by all, or failed (a peer died): the name goes now, the memory with the last mapping
        if path:
            _release(path)
    failed = [e for e in errors if e]
    if failed:
        if made is not None:
            made.close()
        raise SetupError(f"mode host_staged: set-up failed on {failed[0]}")
    _REGIONS[key] = made
    return made
