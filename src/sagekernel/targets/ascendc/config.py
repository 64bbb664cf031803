"""The Ascend C target's configuration: which template, which build path, which chip.

Read from the environment so a user with CANN chooses without code (`sage doctor` shows it):
SAGE_ASCENDC_TEMPLATE (kernel-only | full), SAGE_ASCENDC_BUILD (framework | direct),
SAGE_ASCENDC_SOC (e.g. Ascend910B2), SAGE_ASCENDC_NPU_ARCH (e.g. dav-2201),
SAGE_ASCENDC_VENDOR (vendor dir name). A task's SAGE_ASCENDC["template"] overrides the template.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

BUILD_PATHS = ("framework", "direct")

#: SoC name -> (msopgen compute unit for -c, AddConfig name, bisheng --npu-arch).
SOCS: dict[str, tuple[str, str, str]] = {
    "Ascend910B1": ("ai_core-Ascend910B1", "ascend910b", "dav-2201"),
    "Ascend910B2": ("ai_core-Ascend910B2", "ascend910b", "dav-2201"),
    "Ascend910B3": ("ai_core-Ascend910B3", "ascend910b", "dav-2201"),
    "Ascend910B4": ("ai_core-Ascend910B4", "ascend910b", "dav-2201"),
    "Ascend910_9391": ("ai_core-Ascend910_9391", "ascend910_93", "dav-2201"),  # 910C (A3)
    "Ascend310P3": ("ai_core-Ascend310P3", "ascend310p", "dav-m200"),
}


@dataclass(frozen=True)
class AscendConfig:
    template: str = "full"
    build_path: str = "framework"
    soc: str = "Ascend910B2"
    vendor: str = "sage"

    @property
    def compute_unit(self) -> str:
        return SOCS[self.soc][0]

    @property
    def add_config(self) -> str:
        return SOCS[self.soc][1]

    @property
    def npu_arch(self) -> str:
        return os.environ.get("SAGE_ASCENDC_NPU_ARCH") or SOCS[self.soc][2]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AscendConfig:
        env = os.environ if env is None else env
        template = env.get("SAGE_ASCENDC_TEMPLATE", cls.template)
        build_path = env.get("SAGE_ASCENDC_BUILD", cls.build_path)
        soc = env.get("SAGE_ASCENDC_SOC", cls.soc)
        if template not in ("kernel-only", "full"):
            raise ValueError(f"SAGE_ASCENDC_TEMPLATE={template!r}: use kernel-only or full")
        if build_path not in BUILD_PATHS:
            raise ValueError(f"SAGE_ASCENDC_BUILD={build_path!r}: use framework or direct")
        if soc not in SOCS:
            raise ValueError(f"SAGE_ASCENDC_SOC={soc!r}: known SoCs are {', '.join(SOCS)}")
        return cls(template, build_path, soc, env.get("SAGE_ASCENDC_VENDOR", cls.vendor))


__all__ = ["BUILD_PATHS", "SOCS", "AscendConfig"]
