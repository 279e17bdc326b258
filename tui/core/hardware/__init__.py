"""Devices, model layouts and the roofline: decode ceilings, prefill floors, where each phase sits under the
device's roofs, and the GPU check's verdicts."""
