"""`dslc calibrate` and `dslc plan`: options, progress, tables, plots and factories."""
