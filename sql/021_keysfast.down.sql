-- Reverts 021_keysfast.up.sql: nothing to undo (the older binary's migrate applies its claim).
SELECT 1;
