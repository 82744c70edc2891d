"""Results store, tables, plots and reports, built from records and result files only.

Try it: `fabriclab simulate sweep --preset fatness`.
"""
