"""How recordmill's ``DataLoader`` hands a batch out: pinned where torch's own iterator would
pin it, and on an ``accelerate.Accelerator``'s device once ``accelerator.prepare()`` took it.

``accelerator.prepare(loader)`` would otherwise make a plain torch loader of the loader's parts
(its dataset, sampler and collate), which neither deals the batches to the ranks as this loader
does (so they would be dealt twice) nor resumes. A loader that says it is prepared already is
handed back as it is, and ``Accelerator.save_state()``/``load_state()`` keep the state of a
loader that says it is stateful.
"""

from __future__ import annotations

from typing import Any

from torch.utils import data as torch_data

__all__ = ["Handing"]


class Handing:
    """The part of recordmill's ``DataLoader`` that hands batches out (a mixin of it)."""

    # Read by Accelerator.save_state()/load_state(): they keep this loader's state_dict().
    use_stateful_dataloader = True
    _device: Any = None  # the Accelerator's, once it prepared this loader
    _pins: tuple[bool, Any] = (False, None)  # whether torch's iterator pins, and on what device

    @property
    def _is_accelerate_prepared(self) -> bool:
        return True  # accelerator.prepare() hands it back as it is

    @_is_accelerate_prepared.setter
    def _is_accelerate_prepared(self, prepared: bool) -> None:
        """Set by ``accelerator.prepare()``: batches go to its device from then on."""
        from accelerate.state import PartialState

        self._device = PartialState().device if prepared else None

    def _seen_pins(self, iterator: Any) -> None:
        """Where torch's iterator pins (pin_memory, and an accelerator that can), on which device."""
        device = getattr(iterator, "_pin_memory_device", None) or None
        self._pins = (getattr(iterator, "_pin_memory", False), device)

    def _handed(self, batch: Any, pinned: bool = False) -> Any:
        """The batch pinned (unless torch's iterator did), where and as torch's own iterator pins,
        and on the Accelerator's device where one prepared this loader (as accelerate's own
        loaders put it there)."""
        pins, device = self._pins
        if pins and not pinned:
            batch = torch_data._utils.pin_memory.pin_memory(batch, device)
        if self._device is not None and self._device.type != "cpu":
            from accelerate.utils import send_to_device

            batch = send_to_device(batch, self._device, non_blocking=pins)
        return batch
