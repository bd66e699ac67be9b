"""Security: ACL operations and resource types (what authorizers and Describe APIs speak in)."""
