"""Placeholder: this page is being built."""
import streamlit as st

st.title("Coming soon")
