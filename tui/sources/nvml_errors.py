"""NVML's errors in words: why it would not start, and whether a failed GPM call means no GPM, no permission, or
another failure (`GpuReading.gpm_status`)."""

from __future__ import annotations

from typing import Any


def nvml_reason(error: BaseException) -> str:
    name = type(error).__name__.removeprefix("NVMLError_")
    return f"{name}: {error}" if str(error) and str(error) != name else name


def init_reason(n: Any, error: BaseException) -> str:
    """Why NVML would not start, worded for a person."""
    if isinstance(error, n.NVMLError_LibraryNotFound):
        return f"no NVIDIA driver here (NVML: {error})"
    if isinstance(error, n.NVMLError_DriverNotLoaded):
        return f"the NVIDIA driver is not loaded (NVML: {error})"
    if isinstance(error, n.NVMLError_LibRmVersionMismatch):
        return f"NVML and the kernel driver differ in version; reload the driver or reboot (NVML: {error})"
    return f"NVML failed to start: {nvml_reason(error)}"


_GPM_ABSENT = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound", "NVMLError_ArgumentVersionMismatch")
"""NVML's ways of saying there is no GPM: the GPU lacks it, the driver predates it, or speaks another struct version."""


def gpm_status(n: Any, error: BaseException) -> str:
    """`GpuReading.gpm_status` for a failed GPM call: "no_permission", "unsupported" or "failed"."""
    if isinstance(error, getattr(n, "NVMLError_NoPermission", ())):
        return "no_permission"
    absent = tuple(getattr(n, name) for name in _GPM_ABSENT if hasattr(n, name))
    if isinstance(error, (AttributeError, *absent)):  # AttributeError: a binding without GPM's functions
        return "unsupported"
    return "failed"
