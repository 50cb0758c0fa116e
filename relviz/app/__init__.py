"""The app's support code: the only package of relviz that imports streamlit (the library below it
never does). Imports nothing itself, so reading a small module here (page_limits) stays cheap."""
