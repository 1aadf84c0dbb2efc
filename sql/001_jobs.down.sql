-- Reverts 001_jobs.up.sql. Drops every job: for development only.
DROP TABLE IF EXISTS jobs;
