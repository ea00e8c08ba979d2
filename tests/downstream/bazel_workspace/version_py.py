import ncclbind

ncclbind.show_versions()
