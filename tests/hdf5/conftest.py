"""Shared fixtures of the HDF5 / NetCDF-4 tests."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def netcdf(tmp_path_factory):
    """A CF NetCDF-4 file: time/lat/lon coordinates, a packed int16 variable (scale_factor,
    add_offset, _FillValue) chunked with gzip+shuffle, a contiguous float64 one, a group."""
    h5netcdf = pytest.importorskip("h5netcdf", reason="NetCDF-4 datasets need h5netcdf: pip install 'hpcbridge[hdf5]'")
    path = tmp_path_factory.mktemp("nc") / "climate.nc"
    rng = np.random.default_rng(5)
    with h5netcdf.File(path, "w") as f:
        f.dimensions = {"time": 6, "lat": 45, "lon": 90}
        f.attrs["title"] = "hpcbridge test"
        t = f.create_variable("time", ("time",), "f8")
        t[:] = np.arange(6) * 30.0
        t.attrs["units"] = "days since 2000-01-01"
        f.create_variable("lat", ("lat",), "f4")[:] = np.linspace(-88, 88, 45)
        f.create_variable("lon", ("lon",), "f4")[:] = np.arange(90) * 4.0
        packed = rng.integers(-30000, 30000, size=(6, 45, 90)).astype("i2")
        packed[0, :3, :5] = -32767
        v = f.create_variable("tas", ("time", "lat", "lon"), "i2", chunks=(1, 15, 45), compression="gzip",
                              shuffle=True)
        v[:] = packed
        v.attrs.update({"scale_factor": 0.01, "add_offset": 280.0, "_FillValue": np.int16(-32767), "units": "K"})
        f.create_variable("pr", ("time", "lat", "lon"), "f8")[:] = rng.gamma(2.0, size=(6, 45, 90))
        g = f.create_group("ocean")
        g.dimensions = {"depth": 7}
        g.create_variable("sst", ("depth", "lon"), "f4", chunks=(7, 30), compression="gzip")[:] = \
            rng.normal(size=(7, 90)).astype("f4")
    return str(path)
