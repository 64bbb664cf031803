"""The Ascend C target's configuration: which template, which build path, which chip.

Read from the environment so a user with CANN chooses without code (`sage doctor` shows it):
SAGE_ASCENDC_TEMPLATE (kernel-only | full), SAGE_ASCENDC_BUILD (framework | direct),
SAGE_ASCENDC_SOC (e.g. Ascend910B2; unset: the SoC the machine reports, see availability.detect_soc),
SAGE_ASCENDC_NPU_ARCH (e.g. dav-2201), SAGE_ASCENDC_VENDOR (vendor dir name). A task's
SAGE_ASCENDC["template"] overrides the template.

SoCs are known by family, as CANN's own op build maps them (asc-devkit
`cmake/asc/fwk_modules/util/opdesc_parser.py`, SOC_TO_SHORT_SOC_MAP): every 910B variant
(Ascend910B1..B4, B2C, B4-1) compiles for `ascend910b`, every 910C variant (Ascend910_93xx) for
`ascend910_93`, so a box that reports a variant this table has not seen still configures.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

BUILD_PATHS = ("framework", "direct")
DEFAULT_SOC = "Ascend910B2"

#: SoC family: (name pattern, AddConfig / ASCEND_COMPUTE_UNIT name, bisheng --npu-arch).
#: A2 (910B) and A3 (910C) share the dav-2201 architecture; 310P is dav-m200.
SOC_FAMILIES: tuple[tuple[str, str, str], ...] = (
    (r"Ascend910B[1-4](C|-1)?", "ascend910b", "dav-2201"),
    (r"Ascend910_93[0-9]{2}", "ascend910_93", "dav-2201"),
    (r"Ascend310P[1357](vir0[1248])?", "ascend310p", "dav-m200"),
)
#: SoCs reported by real 910B / 910C / 310P boxes (the same map), for messages and tests.
KNOWN_SOCS = (
    "Ascend910B1", "Ascend910B2", "Ascend910B2C", "Ascend910B3", "Ascend910B4", "Ascend910B4-1",
    "Ascend910_9391", "Ascend910_9392", "Ascend910_9381", "Ascend910_9382", "Ascend910_9372",
    "Ascend910_9362", "Ascend310P1", "Ascend310P3",
)  # fmt: skip


def soc_family(soc: str) -> tuple[str, str] | None:
    """(AddConfig name, npu arch) of a SoC name, or None for a SoC outside the known families.
    Case-insensitive: `npu-smi` prints `910B2`, torch_npu `Ascend910B2`."""
    name = soc.strip()
    if not name.lower().startswith("ascend"):
        name = "Ascend" + name
    for pattern, unit, arch in SOC_FAMILIES:
        if re.fullmatch(pattern, name, flags=re.I):
            return unit, arch
    return None


def canonical_soc(soc: str) -> str:
    """`910b2c` / `ascend910B2C` -> `Ascend910B2C` (the spelling msOpGen's `-c ai_core-<SoC>` takes)."""
    name = soc.strip()
    body = name[6:] if name.lower().startswith("ascend") else name
    return "Ascend" + body.upper().replace("VIR", "vir")


@dataclass(frozen=True)
class AscendConfig:
    template: str = "full"
    build_path: str = "framework"
    soc: str = DEFAULT_SOC
    vendor: str = "sage"
    soc_source: str = "default"  # "env" | "detected" | "default": where `soc` came from (doctor shows it)

    @property
    def compute_unit(self) -> str:
        return f"ai_core-{self.soc}"

    @property
    def add_config(self) -> str:
        family = soc_family(self.soc)
        assert family is not None  # from_env and __post_init__ refuse anything else
        return family[0]

    @property
    def npu_arch(self) -> str:
        return os.environ.get("SAGE_ASCENDC_NPU_ARCH") or (soc_family(self.soc) or ("", "dav-2201"))[1]

    def __post_init__(self) -> None:
        if soc_family(self.soc) is None:
            raise ValueError(
                f"SoC {self.soc!r} is not a 910B (Ascend910B1..B4, B2C, B4-1), 910C (Ascend910_93xx) "
                f"or 310P SoC; known: {', '.join(KNOWN_SOCS)}"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, detect: bool = True) -> AscendConfig:
        """The configuration from SAGE_ASCENDC_*; with no SAGE_ASCENDC_SOC, the SoC the machine
        reports (only probed where an NPU device node exists), else DEFAULT_SOC."""
        env = os.environ if env is None else env
        template = env.get("SAGE_ASCENDC_TEMPLATE", cls.template)
        build_path = env.get("SAGE_ASCENDC_BUILD", cls.build_path)
        if template not in ("kernel-only", "full"):
            raise ValueError(f"SAGE_ASCENDC_TEMPLATE={template!r}: use kernel-only or full")
        if build_path not in BUILD_PATHS:
            raise ValueError(f"SAGE_ASCENDC_BUILD={build_path!r}: use framework or direct")
        soc, source = env.get("SAGE_ASCENDC_SOC", ""), "env"
        if not soc and detect:
            from sagekernel.targets.ascendc.availability import detect_soc  # probes only with an NPU

            soc, source = detect_soc() or "", "detected"
        if not soc:
            soc, source = DEFAULT_SOC, "default"
        if soc_family(soc) is None:
            raise ValueError(f"SAGE_ASCENDC_SOC={soc!r}: known SoCs are {', '.join(KNOWN_SOCS)}")
        return cls(
            template, build_path, canonical_soc(soc), env.get("SAGE_ASCENDC_VENDOR", cls.vendor), source
        )


__all__ = [
    "BUILD_PATHS",
    "DEFAULT_SOC",
    "KNOWN_SOCS",
    "SOC_FAMILIES",
    "AscendConfig",
    "canonical_soc",
    "soc_family",
]
