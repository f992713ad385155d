"""The built-in HTTP providers; importing this package registers each under its ``api``."""
