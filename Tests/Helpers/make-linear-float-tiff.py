#!/usr/bin/env python3
"""Makes Tests/Fixtures/edge/float-linear-icc_nikon.tif: a float TIFF in linear
light with an embedded linear (gamma 1.0) ICC profile of sRGB's primaries and
D65 white, as HDR merges and scientific tools write them. Its pixels are
Tests/Fixtures/photos/Nikon-D3100.jpg, shrunk, converted to linear floats, so
the right 8-bit sRGB reading of it is that photo's pixels. The profile is made
by lcms2 itself (cmsCreateRGBProfile with cmsBuildGamma(1.0)).

Usage: make-linear-float-tiff.py OUT.tif   (needs pyvips and liblcms2)
"""
import ctypes
import ctypes.util
import os
import sys

import pyvips

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class XyY(ctypes.Structure):
    _fields_ = [("x", ctypes.c_double), ("y", ctypes.c_double), ("Y", ctypes.c_double)]


class Primaries(ctypes.Structure):
    _fields_ = [("r", XyY), ("g", XyY), ("b", XyY)]


def linear_profile():
    lcms = ctypes.CDLL(ctypes.util.find_library("lcms2"))
    lcms.cmsBuildGamma.restype = ctypes.c_void_p
    lcms.cmsCreateRGBProfile.restype = ctypes.c_void_p
    lcms.cmsCreateRGBProfile.argtypes = [ctypes.POINTER(XyY), ctypes.POINTER(Primaries), ctypes.c_void_p * 3]
    lcms.cmsSaveProfileToMem.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]
    gamma = lcms.cmsBuildGamma(None, ctypes.c_double(1.0))
    white = XyY(0.3127, 0.3290, 1.0)
    primaries = Primaries(XyY(0.64, 0.33, 1), XyY(0.30, 0.60, 1), XyY(0.15, 0.06, 1))
    profile = lcms.cmsCreateRGBProfile(ctypes.byref(white), ctypes.byref(primaries),
                                       (ctypes.c_void_p * 3)(gamma, gamma, gamma))
    size = ctypes.c_uint32(0)
    lcms.cmsSaveProfileToMem(profile, None, ctypes.byref(size))
    buffer = ctypes.create_string_buffer(size.value)
    lcms.cmsSaveProfileToMem(profile, buffer, ctypes.byref(size))
    return buffer.raw


def main():
    photo = pyvips.Image.new_from_file(os.path.join(ROOT, "Tests/Fixtures/photos/Nikon-D3100.jpg"))
    linear = photo.thumbnail_image(96).colourspace("scrgb")
    linear.set_type(pyvips.GValue.blob_type, "icc-profile-data", linear_profile())
    linear.tiffsave(sys.argv[1])


if __name__ == "__main__":
    main()
