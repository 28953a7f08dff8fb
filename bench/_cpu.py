"""This CPU as the benchmarks state it: model, instruction set, core count and theoretical float32 FMA peak.

Every throughput figure is only meaningful next to the CPU that produced it: TensorFlow's, numpy's and torch's
matmul kernels pick different code paths on AVX-512 and AVX2 machines, so the same command gives different
rankings on an AMD EPYC with AVX-512 (Zen 4) and one without (Zen 2/3).
"""
from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class CpuInfo:
    """What /proc/cpuinfo says about the cores this process may use."""
    model_name: str
    vendor: str
    family: int
    model: int
    isa: str  # "AVX-512", "AVX2+FMA" or "no AVX2"
    cores: int
    reported_mhz: float
    kernels: str = ""  # e.g. "kernels held to AVX2" when the libraries were told to use less than `isa`

    def fma_units_and_lanes(self) -> tuple[int, int]:
        """(full-width float32 FMA issues per cycle, float32 lanes per issue) assumed for this ISA and vendor.

        AMD Zen 4 runs AVX-512 on its two 256-bit FMA pipes (one 512-bit FMA per cycle); Intel server cores with
        AVX-512 have two 512-bit FMA units (some Xeon Silver/Bronze parts have one); AVX2 cores since Haswell and
        Zen 2 have two 256-bit FMA units.
        """
        if self.isa == "AVX-512":
            return (1 if self.vendor == "AuthenticAMD" else 2), 16
        if self.isa == "AVX2+FMA":
            return 2, 8
        return 1, 4

    def fma_peak_gflops(self, ghz: float | None = None) -> float:
        """cores x GHz x FMA units x lanes x 2 FLOPs (multiply and add), at `ghz` or the reported clock."""
        units, lanes = self.fma_units_and_lanes()
        return self.cores * (ghz or self.reported_mhz / 1000) * units * lanes * 2

    def label(self) -> str:
        """One line to write next to every figure: CPU model, family/model, ISA, cores."""
        kernels = f" ({self.kernels})" if self.kernels else ""
        return (f"{self.model_name} (family {self.family} model {self.model}), {self.isa}{kernels}, "
                f"{self.cores} cores")

    def peak_sentence(self) -> str:
        """The theoretical peak with every assumption spelled out."""
        units, lanes = self.fma_units_and_lanes()
        return (f"theoretical float32 FMA peak {self.fma_peak_gflops():.0f} GFLOP/s = {self.cores} cores × "
                f"{self.reported_mhz / 1000:.2f} GHz (the clock /proc/cpuinfo reports; boost clocks are not "
                f"visible in this VM) × {units} FMA issue(s)/cycle × {lanes} float32 lanes ({self.isa}) × 2")


def read_cpu(cpuinfo_path: str = "/proc/cpuinfo") -> CpuInfo:
    """Parses the first processor's entry of /proc/cpuinfo; the core count is what this process may use."""
    fields: dict[str, str] = {}
    try:
        with open(cpuinfo_path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    if fields:
                        break
                    continue
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    flags = set(fields.get("flags", "").split())
    isa = "AVX-512" if "avx512f" in flags else "AVX2+FMA" if {"avx2", "fma"} <= flags else "no AVX2"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return CpuInfo(model_name=fields.get("model name", "unknown CPU"), vendor=fields.get("vendor_id", ""),
                   family=int(fields.get("cpu family", "0") or 0), model=int(fields.get("model", "0") or 0),
                   isa=isa, cores=cores, reported_mhz=float(fields.get("cpu MHz", "0") or 0))


# Environment that keeps oneDNN (TensorFlow's and torch's), MKL (torch's BLAS) and OpenBLAS (numpy's) on their AVX2
# kernels on an AVX-512 machine, to approximate an AVX2-only CPU (Zen 2/3) with the same cores and memory.
AVX2_ONLY_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                 "OPENBLAS_CORETYPE": "Zen"}
