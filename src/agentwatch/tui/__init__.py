"""The Textual dashboard: a model without Textual, the on-demand table, the screens, the styles."""
