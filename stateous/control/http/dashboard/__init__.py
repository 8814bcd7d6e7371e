"""The dashboard's static files (a page, its style sheet and its script), shipped as package
data and served under `/ui/` by `stateous.control.http.ui`. They hold no data: the script asks the
API for everything it shows."""
