"""People's identity: who may sign in to the consoles and how.

Members' and operators' passwords (``passwords``: argon2id, hashed off the event loop), the allowance of password
attempts (``attempts``), console sessions (``sessions`` for members, ``operator_sessions`` for operators),
operator accounts (``operator_accounts``), invitation links (``invitations``), password-reset links
(``password_resets``) and the e-mail that carries such links (``mail``). The API, the CLI, the first
start (``bootstrap``) and both consoles use them from here; none of it is an API credential (the API reads bearer
keys only, ``auth/``).
"""
