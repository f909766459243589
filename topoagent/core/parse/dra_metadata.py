"""The device metadata a DRA kubelet plugin hands a container (KEP-5304, "DRA Device Attributes
Downward API"): per claim and request, one JSON file per driver at
``/var/run/dra-device-attributes/<claim>/<request>/<driver>-metadata.json``, holding a
``DeviceMetadata`` object (``apiVersion: metadata.resource.k8s.io/v1alpha1``) whose
``requests[].devices[].attributes`` are the devices' ResourceSlice attributes.

Pure: the text in, the PCI addresses of its devices out (``resource.kubernetes.io/pciBusID``,
the standard attribute; the KEP's own example spells it ``resource.k8s.io/pciBusID``, which is
read too).
"""

from __future__ import annotations

import msgspec

from topoagent.core.bdf import is_bdf
from topoagent.core.errors import InputError

__all__ = ["API_GROUP", "DraMetadataError", "KIND", "PCI_BUS_ID_NAMES", "parse_device_metadata"]

#: The schema's group (``apiVersion`` is ``<group>/<version>``) and kind (KEP-5304).
API_GROUP = "metadata.resource.k8s.io"
KIND = "DeviceMetadata"
#: The pciBusID attribute's names: the standard one (deviceattribute.StandardDeviceAttributePCIBusID),
#: then the KEP's example spelling.
PCI_BUS_ID_NAMES = ("resource.kubernetes.io/pciBusID", "resource.k8s.io/pciBusID")


class DraMetadataError(InputError):
    """A metadata file that is no DeviceMetadata this reader knows."""


class _Value(msgspec.Struct):
    string: str | None = None


class _Device(msgspec.Struct):
    name: str = ""
    driver: str = ""
    attributes: dict[str, _Value] = msgspec.field(default_factory=dict)


class _Request(msgspec.Struct):
    name: str = ""
    devices: list[_Device] = msgspec.field(default_factory=list)


class _Metadata(msgspec.Struct, rename={"api_version": "apiVersion"}):
    api_version: str = ""
    kind: str = ""
    requests: list[_Request] = msgspec.field(default_factory=list)


def parse_device_metadata(text: str) -> tuple[str, ...]:
    """The PCI addresses (lower case) of the devices a metadata file names, in its order;
    DraMetadataError for text that is no DeviceMetadata of the known group."""
    try:
        doc = msgspec.json.decode(text, type=_Metadata)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise DraMetadataError(f"not DRA device metadata: {exc}") from None
    if doc.api_version.partition("/")[0] != API_GROUP or doc.kind != KIND:
        raise DraMetadataError(f"apiVersion {doc.api_version!r} kind {doc.kind!r} is not {API_GROUP}/* {KIND}")
    out: list[str] = []
    for request in doc.requests:
        for device in request.devices:
            value = next((device.attributes[n].string for n in PCI_BUS_ID_NAMES if n in device.attributes), None)
            if value is not None and is_bdf(value):
                out.append(value.lower())
    return tuple(out)
